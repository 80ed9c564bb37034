package ctl

// What lockctl -o json prints goes through emptyNotNull: a list is always
// a list (docs/lockctl.md, "Conventions").

import (
	"reflect"

	"github.com/lockservice/lockd/internal/mutant"
)

// emptyNotNull is v with every nil slice and nil map in it, at any depth
// (through pointers, structs, slices, maps and interfaces), made empty, so
// that JSON shows [] and {} where it would show null: a script can iterate
// any list lockctl prints. A field with omitempty is left out either way.
// A []byte stays as it is (JSON shows it as a base64 string).
func emptyNotNull(v any) any {
	if v == nil || mutant.On(mutant.JSONNulls) {
		return v
	}
	return emptyNotNullValue(reflect.ValueOf(v)).Interface()
}

func emptyNotNullValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(emptyNotNullValue(v.Elem()))
		return p
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(emptyNotNullValue(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if f := out.Field(i); f.CanSet() { // exported: the ones JSON shows
				f.Set(emptyNotNullValue(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(emptyNotNullValue(v.Index(i)))
		}
		return out
	case reflect.Map:
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), emptyNotNullValue(it.Value()))
		}
		return out
	}
	return v
}
