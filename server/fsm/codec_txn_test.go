package fsm

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/lockservice/lockd/api"
)

// fullTxnConds are txn conditions setting every field, of every kind and
// one without a code.
func fullTxnConds() []api.TxnCond {
	return []api.TxnCond{
		{If: api.CondHolds, Path: "/demo/l", Token: 1<<40 + 3, Version: 9,
			Cmp: api.CmpGreater, Rev: 1<<62 + 1, Value: bytes.Repeat([]byte{0, 'c'}, 100), Owner: 1 << 41},
		{If: api.CondVersion, Path: "/demo/v", Version: 1 << 63},
		{If: api.CondMissing, Path: "/demo/m"}, {If: api.CondExists, Path: "/demo/e"},
		{If: api.CondCreateRev, Path: "/demo/c", Cmp: api.CmpEqual, Rev: 1<<40 + 7},
		{If: api.CondModRev, Path: "/demo/c", Cmp: api.CmpNotEqual, Rev: 1},
		{If: api.CondVersionCmp, Path: "/demo/c", Cmp: api.CmpLess, Version: 3},
		{If: api.CondValue, Path: "/demo/c", Cmp: api.CmpGreater, Value: []byte{0}},
		{If: api.CondOwner, Path: "/demo/c", Cmp: api.CmpEqual, Owner: 12},
		{If: api.CondValue, Cmp: "some_future_operator"},
		{If: "some_future_condition"}, {},
	}
}

// fullTxnOps are txn writes setting every field, of every kind and one
// without a code, with a value long enough for a two-byte length.
func fullTxnOps() []TxnOp {
	return []TxnOp{
		{TxnOp: api.TxnOp{Op: api.TxnCreate, Path: "/demo/q-", Value: bytes.Repeat([]byte{0, 'v'}, 100), Version: u64(0),
			Ephemeral: true, Sequential: true, MakeParents: true, Container: true, Uncontain: true}, OwnOnly: true, ParentsFrom: "/demo"},
		{TxnOp: api.TxnOp{Op: api.TxnPut, Path: "/demo/p", Version: u64(7)}},
		{TxnOp: api.TxnOp{Op: api.TxnDelete, Path: "/demo/d"}},
		{TxnOp: api.TxnOp{Op: "some_future_write"}}, {},
	}
}

// TestTxnFullValuesSetEveryField: a field added to a txn condition or
// write without a value in the full ones (and so, likely, without a codec
// tag) fails.
func TestTxnFullValuesSetEveryField(t *testing.T) {
	for _, v := range []any{fullTxnConds()[0], fullTxnOps()[0], fullTxnOps()[0].TxnOp} {
		rv := reflect.ValueOf(v)
		for i := 0; i < rv.NumField(); i++ {
			if rv.Field(i).IsZero() {
				t.Errorf("%T.%s is zero in the full value", v, rv.Type().Field(i).Name)
			}
		}
	}
}

// TestTxnCodecRoundTrip: txn entries and results, full and at their
// edges (no conditions, a nil version beside a version of 0, empty
// messages), decode to what was encoded, from binary and from JSON.
func TestTxnCodecRoundTrip(t *testing.T) {
	cmds := map[string]Command{
		"full":          {Op: OpTxn, If: fullTxnConds(), Then: fullTxnOps()},
		"no conditions": {Op: OpTxn, Then: []TxnOp{{TxnOp: api.TxnOp{Op: api.TxnPut, Path: "/demo/a"}}}},
		"empty write":   {Op: OpTxn, Then: []TxnOp{{}}},
		"max writes":    {Op: OpTxn, If: make([]api.TxnCond, api.MaxTxnConds), Then: make([]TxnOp, api.MaxTxnOps)},
	}
	for name, c := range cmds {
		roundTripCommand(t, name, c)
		j, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeCommand(j); err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("%s from JSON: %v, %v", name, differingFields(got, c), err)
		}
	}
	nilV := Command{Op: OpTxn, Then: []TxnOp{{TxnOp: api.TxnOp{Op: api.TxnPut}}}}
	zeroV := Command{Op: OpTxn, Then: []TxnOp{{TxnOp: api.TxnOp{Op: api.TxnPut, Version: u64(0)}}}}
	if bytes.Equal(nilV.Encode(), zeroV.Encode()) {
		t.Fatal("a txn write's nil version and version 0 encode alike")
	}
	for name, r := range map[string]Result{
		"nodes":   {TxnNodes: []api.Node{{Path: "/demo/a"}, {}}, Index: 4},
		"failure": {Err: &api.Error{Code: api.CodeConditionFailed, Message: "m"}, FailedIf: 2},
		"write":   {Err: &api.Error{Code: api.CodeForbidden}, FailedThen: api.MaxTxnOps},
	} {
		got, err := DecodeResult(r.Encode())
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("result %s: %+v, %v; want %+v", name, got, err, r)
		}
	}
}

// TestTxnCodecRefusesHostileCounts: a txn list's count past its decoder
// bound, or past the bytes left, is an error, never an allocation.
func TestTxnCodecRefusesHostileCounts(t *testing.T) {
	for name, b := range map[string][]byte{
		"conditions over the bound": cat([]byte{codecV1, cmdTxnIf}, uv(maxCodecTxn+1), []byte{codecEnd}),
		"writes past the bytes":     cat([]byte{codecV1, cmdTxnThen}, uv(40), []byte{0, codecEnd}),
		"nodes over the bound":      cat([]byte{codecV1, resTxnNodes}, uv(1<<40), []byte{codecEnd}),
		"unknown write field":       cat([]byte{codecV1, cmdTxnThen, 1, 2, 0x7f, 0, codecEnd}),
	} {
		if _, err := DecodeCommand(b); err == nil && name != "nodes over the bound" {
			t.Fatalf("%s: decoded", name)
		}
		if name == "nodes over the bound" {
			if _, err := DecodeResult(b); err == nil {
				t.Fatalf("%s: decoded", name)
			}
		}
	}
}
