package ctl

// The JSON shapes of docs/lockctl.md, read from the page itself: each
// ```json fence after a <!-- json-shape: KEY[, KEY...] --> marker, and the
// field list after it ("How this page is checked" there says the rules).
// jsonshape_test.go runs the commands and matches their output.

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// lockctlDoc is the page, from this package's directory.
const lockctlDoc = "../docs/lockctl.md"

var (
	shapeMarker = regexp.MustCompile(`^<!-- json-shape: (.+) -->$`)
	fieldLine   = regexp.MustCompile("^- `([^`]+)`(?: \\(([^)]*)\\))?:")
)

// JSON types as the page names them.
const (
	jsonObject  = "object"
	jsonArray   = "array"
	jsonString  = "string"
	jsonNumber  = "number"
	jsonBoolean = "boolean"
)

// shape is what the page shows at one place of an output.
type shape struct {
	kind   string            // a JSON type
	fields map[string]*field // an object's fields (nil for a map)
	values *shape            // a map's values (an object tagged map)
	elem   *shape            // an array's elements; nil if the example's is empty
	ref    string            // "as KEY[.PATH]", until resolved
}

type field struct {
	*shape
	optional bool
}

// docExample is one marked fence: the keys it shows the output of, the
// example, its shape, and its type (the "type" field of a line of a
// streaming command).
type docExample struct {
	keys    []string
	line    int // the marker's
	end     int // the closing fence's
	example any
	root    *shape
	typ     string
	notes   []fieldNote
}

// fieldNote is one line of a field list.
type fieldNote struct {
	path string
	tags []string
	line int
}

// docShapes is the page's examples by key.
type docShapes map[string][]*docExample

// parseDocShapes reads the page's marked fences into shapes, applies their
// field lists, resolves "as" references and checks each example against
// its final shape.
func parseDocShapes(text string) (docShapes, error) {
	exs, err := scanDoc(text)
	if err != nil {
		return nil, err
	}
	shareFieldLists(exs)
	shapes := docShapes{}
	for _, ex := range exs {
		if ex.root, err = buildShape(ex.example); err != nil {
			return nil, fmt.Errorf("line %d: %v", ex.line, err)
		}
		for _, n := range ex.notes {
			if err := annotate(ex.root, n); err != nil {
				return nil, fmt.Errorf("line %d: `%s`: %v", n.line, n.path, err)
			}
		}
		for _, k := range ex.keys {
			shapes[k] = append(shapes[k], ex)
		}
	}
	for _, ex := range exs {
		if err := shapes.resolve(ex.root, 0); err != nil {
			return nil, fmt.Errorf("line %d: %v", ex.line, err)
		}
	}
	for _, ex := range exs {
		if probs := matchShape(ex.example, ex.root, ""); len(probs) > 0 {
			return nil, fmt.Errorf("line %d: the example does not fit its own field list: %s", ex.line, strings.Join(probs, "; "))
		}
		if p := emptyArray(ex.root, ""); p != "" {
			return nil, fmt.Errorf("line %d: %s: an empty array in the example shows no element", ex.line, p)
		}
	}
	return shapes, nil
}

// scanDoc finds the marked fences and their field lists.
func scanDoc(text string) ([]*docExample, error) {
	lines := strings.Split(text, "\n")
	var out []*docExample
	for i := 0; i < len(lines); i++ {
		m := shapeMarker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		ex := &docExample{line: i + 1}
		for _, k := range strings.Split(m[1], ",") {
			ex.keys = append(ex.keys, strings.Join(strings.Fields(k), " "))
		}
		if i+1 >= len(lines) || lines[i+1] != "```json" {
			return nil, fmt.Errorf("line %d: a json-shape marker must be followed by a ```json fence", i+1)
		}
		end := i + 2
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		ex.end = end + 1
		body := strings.Join(lines[i+2:end], "\n")
		if err := json.Unmarshal([]byte(body), &ex.example); err != nil {
			return nil, fmt.Errorf("line %d: the example is not JSON: %v", i+3, err)
		}
		if obj, ok := ex.example.(map[string]any); ok {
			ex.typ, _ = obj["type"].(string)
		}
		i = end + 1
		for ; i < len(lines) && (lines[i] == "" || strings.HasPrefix(lines[i], "- `")); i++ {
			if lines[i] == "" {
				continue
			}
			f := fieldLine.FindStringSubmatch(lines[i])
			if f == nil {
				return nil, fmt.Errorf("line %d: a field line is - `PATH` (TAGS): text", i+1)
			}
			n := fieldNote{path: f[1], line: i + 1}
			for _, t := range strings.Split(f[2], ",") {
				if t = strings.TrimSpace(t); t != "" {
					n.tags = append(n.tags, t)
				}
			}
			ex.notes = append(ex.notes, n)
		}
		i--
		out = append(out, ex)
	}
	return out, nil
}

// shareFieldLists gives a run of fences of the same keys (one per line
// kind of a streaming command), with nothing but blank lines between
// them, the field list after the last one.
func shareFieldLists(exs []*docExample) {
	for i := len(exs) - 2; i >= 0; i-- {
		a, b := exs[i], exs[i+1]
		if len(a.notes) == 0 && slices.Equal(a.keys, b.keys) && b.line == a.end+2 {
			a.notes = b.notes
		}
	}
}

// jsonKind is the JSON type of a decoded value ("null" for nil).
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return jsonObject
	case []any:
		return jsonArray
	case string:
		return jsonString
	case float64, json.Number:
		return jsonNumber
	case bool:
		return jsonBoolean
	}
	return "null"
}

// buildShape is the shape an example shows: an array's elements merged
// (a field in any of them is a field of the array's elements).
func buildShape(v any) (*shape, error) {
	s := &shape{kind: jsonKind(v)}
	switch v := v.(type) {
	case nil:
		return nil, fmt.Errorf("null in an example: show a value (an optional field is left out, never null)")
	case map[string]any:
		s.fields = map[string]*field{}
		for k, fv := range v {
			fs, err := buildShape(fv)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", k, err)
			}
			s.fields[k] = &field{shape: fs}
		}
	case []any:
		for _, e := range v {
			es, err := buildShape(e)
			if err == nil {
				s.elem, err = mergeShapes(s.elem, es)
			}
			if err != nil {
				return nil, fmt.Errorf("[]: %v", err)
			}
		}
	}
	return s, nil
}

// mergeShapes is the union of two shapes of one place (a may be nil).
func mergeShapes(a, b *shape) (*shape, error) {
	switch {
	case a == nil:
		return b, nil
	case b == nil:
		return a, nil
	case a.kind != b.kind:
		return nil, fmt.Errorf("elements of two types, %s and %s", a.kind, b.kind)
	}
	var err error
	for k, bf := range b.fields {
		if af, ok := a.fields[k]; ok {
			if af.shape, err = mergeShapes(af.shape, bf.shape); err != nil {
				return nil, fmt.Errorf("%s: %v", k, err)
			}
		} else {
			a.fields[k] = bf
		}
	}
	if a.elem, err = mergeShapes(a.elem, b.elem); err != nil {
		return nil, fmt.Errorf("[]: %v", err)
	}
	return a, nil
}

// splitPath is a field list's path as steps: names, and "[]" for an
// array's elements ("entries[].token": entries, [], token).
func splitPath(p string) []string {
	var out []string
	for _, part := range strings.Split(p, ".") {
		name, arrays := part, 0
		for strings.HasSuffix(name, "[]") {
			name, arrays = strings.TrimSuffix(name, "[]"), arrays+1
		}
		if name != "" {
			out = append(out, name)
		}
		for range arrays {
			out = append(out, "[]")
		}
	}
	return out
}

// walk follows steps from s; the last step's field (nil for "[]") and
// shape, which is nil if the last field is not in the example.
func walk(s *shape, steps []string) (*field, *shape, error) {
	var f *field
	for i, st := range steps {
		if s == nil {
			return nil, nil, fmt.Errorf("%s is not in the example", strings.Join(steps[:i], "."))
		}
		if st == "[]" {
			if s.kind != jsonArray || s.elem == nil {
				return nil, nil, fmt.Errorf("%s is not a non-empty array", strings.Join(steps[:i], "."))
			}
			f, s = nil, s.elem
			continue
		}
		if s.kind != jsonObject || s.fields == nil {
			return nil, nil, fmt.Errorf("%s is not an object with fields", strings.Join(steps[:i], "."))
		}
		f = s.fields[st]
		s = nil
		if f != nil {
			s = f.shape
		} else if i < len(steps)-1 {
			return nil, nil, fmt.Errorf("%s is not in the example", strings.Join(steps[:i+1], "."))
		}
	}
	return f, s, nil
}

// annotate applies one field line's tags.
func annotate(root *shape, n fieldNote) error {
	steps := splitPath(n.path)
	if len(steps) == 0 {
		return fmt.Errorf("no path")
	}
	f, s, err := walk(root, steps)
	if err != nil {
		return err
	}
	last := steps[len(steps)-1]
	if s == nil { // a field the example leaves out: optional, with its type
		parent, _, _ := walkParent(root, steps)
		kind := slices.IndexFunc(n.tags, func(t string) bool { return t == jsonString || t == jsonNumber || t == jsonBoolean })
		if kind < 0 || !slices.Contains(n.tags, "optional") {
			return fmt.Errorf("not in the example: show it, or tag it optional with its type (string, number, boolean)")
		}
		parent.fields[last] = &field{shape: &shape{kind: n.tags[kind]}, optional: true}
		return nil
	}
	for _, t := range n.tags {
		switch {
		case t == "optional" && f != nil:
			f.optional = true
		case t == jsonString || t == jsonNumber || t == jsonBoolean:
			if s.kind != t {
				return fmt.Errorf("tagged %s, the example shows %s", t, article(s.kind))
			}
		case t == "map" && s.kind == jsonObject:
			s.values, err = mapValues(s)
			if err != nil {
				return err
			}
		case strings.HasPrefix(t, "as "):
			s.ref = strings.TrimSpace(strings.TrimPrefix(t, "as "))
		default:
			return fmt.Errorf("tag %q does not apply here (optional, string, number, boolean, map, as KEY[.PATH])", t)
		}
	}
	return nil
}

// walkParent is the object holding the last step's field.
func walkParent(root *shape, steps []string) (*shape, *field, error) {
	if len(steps) == 1 {
		return root, nil, nil
	}
	f, s, err := walk(root, steps[:len(steps)-1])
	return s, f, err
}

// mapValues turns an object's fields into a map's values.
func mapValues(s *shape) (*shape, error) {
	var v *shape
	var err error
	for _, k := range slices.Sorted(maps.Keys(s.fields)) {
		if v, err = mergeShapes(v, s.fields[k].shape); err != nil {
			return nil, err
		}
	}
	if v == nil {
		return nil, fmt.Errorf("a map in an example needs an entry")
	}
	s.fields = nil
	return v, nil
}

// resolve replaces each "as KEY[.PATH]" in s by that shape.
func (d docShapes) resolve(s *shape, depth int) error {
	if s == nil {
		return nil
	}
	if depth > 10 {
		return fmt.Errorf("\"as\" references go round in a circle")
	}
	if s.ref != "" {
		key, path, _ := strings.Cut(s.ref, ".")
		exs := d[key]
		if len(exs) != 1 {
			return fmt.Errorf("as %s: %d examples of %q, not one", s.ref, len(exs), key)
		}
		_, t, err := walk(exs[0].root, splitPath(path))
		if err == nil && t == nil {
			err = fmt.Errorf("no such field")
		}
		if err == nil {
			err = d.resolve(t, depth+1)
		}
		if err != nil {
			return fmt.Errorf("as %s: %v", s.ref, err)
		}
		*s = *t
		return nil
	}
	for _, f := range s.fields {
		if err := d.resolve(f.shape, depth); err != nil {
			return err
		}
	}
	if err := d.resolve(s.values, depth); err != nil {
		return err
	}
	return d.resolve(s.elem, depth)
}

// emptyArray names the first array of s without an element shape.
func emptyArray(s *shape, at string) string {
	switch {
	case s == nil:
		return ""
	case s.kind == jsonArray && s.elem == nil:
		return orTop(at)
	case s.kind == jsonArray:
		return emptyArray(s.elem, at+"[]")
	case s.values != nil:
		return emptyArray(s.values, at+".*")
	}
	for _, k := range slices.Sorted(maps.Keys(s.fields)) {
		if p := emptyArray(s.fields[k].shape, join(at, k)); p != "" {
			return p
		}
	}
	return ""
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

func orTop(at string) string {
	if at == "" {
		return "(the top)"
	}
	return at
}

// matchShape lists how v differs from s: a field s does not show, one it
// shows (not optional) that v lacks, a value of another type.
func matchShape(v any, s *shape, at string) []string {
	if k := jsonKind(v); k != s.kind {
		return []string{fmt.Sprintf("%s: the page shows %s, the output has %s", orTop(at), article(s.kind), article(k))}
	}
	var probs []string
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if s.elem == nil {
				return []string{fmt.Sprintf("%s: the page shows no element", orTop(at))}
			}
			probs = append(probs, matchShape(e, s.elem, at+"[]")...)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			switch f := s.fields[k]; {
			case s.values != nil:
				probs = append(probs, matchShape(v[k], s.values, at+".*")...)
			case f == nil:
				probs = append(probs, fmt.Sprintf("%s: not in docs/lockctl.md", join(at, k)))
			default:
				probs = append(probs, matchShape(v[k], f.shape, join(at, k))...)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.fields)) {
			if _, ok := v[k]; !ok && !s.fields[k].optional {
				probs = append(probs, fmt.Sprintf("%s: missing (docs/lockctl.md shows it, not as optional)", join(at, k)))
			}
		}
	}
	return uniq(probs)
}

// article is "an array", "a string", "null".
func article(kind string) string {
	switch kind {
	case "null":
		return kind
	case jsonObject, jsonArray:
		return "an " + kind
	}
	return "a " + kind
}

func uniq(ss []string) []string {
	slices.Sort(ss)
	return slices.Compact(ss)
}

// TestShapeRules: the page's conventions, on a small page of its own: each
// case is an output of the key "x" and the problems it must give.
func TestShapeRules(t *testing.T) {
	const page = "<!-- json-shape: x -->\n```json\n" +
		`{"a": 1, "b": {"c": "s"}, "l": [{"d": true, "e": 1}, {"d": false}], "m": {"k1": [1]}, "r": {"path": "/p", "n": 2}}` +
		"\n```\n\n- `b` (optional): text\n- `l[].e` (optional): text\n- `o` (optional, string): text\n- `m` (map): text\n- `r` (as y): text\n\n" +
		"<!-- json-shape: y -->\n```json\n{\"path\": \"/q\", \"n\": 1, \"z\": false}\n```\n\n- `z` (optional): text\n"
	shapes, err := parseDocShapes(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		out  string
		want []string
	}{
		{`{"a": 1, "b": {"c": "t"}, "l": [], "m": {}, "r": {"path": "/", "n": 0}}`, nil},
		{`{"a": 1, "l": [{"d": true}], "m": {"k2": [], "k3": [4]}, "r": {"path": "/", "n": 0, "z": true}, "o": "x"}`, nil},
		{`{"a": "1", "l": [], "m": {}, "r": {"path": "/", "n": 0}}`, []string{"a: the page shows a number, the output has a string"}},
		{`{"l": [{"d": 1, "f": 2}], "m": {"k": ["x"]}, "r": {"path": "/"}, "new": 1}`, []string{
			"a: missing (docs/lockctl.md shows it, not as optional)",
			"l[].d: the page shows a boolean, the output has a number",
			"l[].f: not in docs/lockctl.md",
			"m.*[]: the page shows a number, the output has a string",
			"new: not in docs/lockctl.md",
			"r.n: missing (docs/lockctl.md shows it, not as optional)",
		}},
		{`{"a": 1, "l": null, "m": {}, "r": {"path": "/", "n": 0}}`, []string{"l: the page shows an array, the output has null"}},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.out), &v); err != nil {
			t.Fatal(err)
		}
		if got := matchShape(v, shapes["x"][0].root, ""); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.out, got, tc.want)
		}
	}
	for _, bad := range []string{
		"<!-- json-shape: x -->\n```json\n{\"a\": null}\n```\n",                           // null
		"<!-- json-shape: x -->\n```json\n{\"a\": []}\n```\n",                             // an empty array
		"<!-- json-shape: x -->\n```json\n{\"a\": 1}\n```\n- `b`: not there\n",            // a stale field line
		"<!-- json-shape: x -->\n```json\n{\"a\": 1}\n```\n- `a` (optinal): typo\n",       // an unknown tag
		"<!-- json-shape: x -->\n```json\n{\"a\": {\"b\": 1}}\n```\n- `a` (as y): no y\n", // no such key
		"<!-- json-shape: x -->\n```json\n{\"a\": [1, \"s\"]}\n```\n",                     // mixed elements
	} {
		if _, err := parseDocShapes(bad); err == nil {
			t.Errorf("parsed:\n%s", bad)
		}
	}
}
