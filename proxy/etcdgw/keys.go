package etcdgw

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lockservice/lockd/api"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Keys are paths (docs/etcd.md, "Keys"). A key beginning with "/" is the
// node of that path; any other key lives under the default prefix (key
// "foo" is /etcd/foo) and comes back as the client wrote it. A key that
// is not a valid path, or lies outside every served prefix, is refused
// InvalidArgument naming the rules. A range is clamped to the one served
// prefix it touches; a range over two is refused FailedPrecondition.

// keyspace maps etcd keys to paths and back.
type keyspace struct {
	// def is the default prefix ("" refuses relative keys).
	def string
	be  Backend
}

// keyPath is one key as a path.
type keyPath struct {
	Path   string
	Rel    bool // the key was relative (under the default prefix)
	Prefix PrefixInfo
}

// keySpan is a key range as paths: Start <= path < End (End "": the one
// path Start).
type keySpan struct {
	Start, End string
	Rel        bool
	Prefix     PrefixInfo
	// Root is the deepest path every path of the span is or lies under:
	// what the caller needs the read role on.
	Root string
}

// pathRules says what a key must be, for refusals.
const pathRules = "a key is a path (\"/prefix/a/b\": no empty, \".\" or \"..\" segments, no trailing \"/\", no control characters) or, without a leading \"/\", a name under the default prefix"

func newKeyspace(def string, be Backend) (keyspace, error) {
	if def != "" {
		if err := api.ValidatePath(def); err != nil {
			return keyspace{}, fmt.Errorf("etcd default prefix: %w", err)
		}
	}
	return keyspace{def: def, be: be}, nil
}

// path maps one key.
func (k keyspace) path(key []byte) (keyPath, error) {
	if len(key) == 0 {
		return keyPath{}, rpctypes.ErrGRPCEmptyKey
	}
	p, rel := string(key), key[0] != '/'
	if rel {
		if k.def == "" {
			return keyPath{}, k.refuse(key, "keys without a leading \"/\" are refused: this gateway has no default prefix")
		}
		p = k.def + "/" + p
	}
	if err := api.ValidatePath(p); err != nil {
		return keyPath{}, k.refuse(key, err.Error())
	}
	info, ok := k.be.Prefix(p)
	if !ok {
		return keyPath{}, k.refuse(key, "it lies outside every served prefix")
	}
	return keyPath{Path: p, Rel: rel, Prefix: info}, nil
}

// key maps a path back to the key a client sees.
func (k keyspace) key(path string, rel bool) []byte {
	if rel && k.def != "" && strings.HasPrefix(path, k.def+"/") {
		return []byte(path[len(k.def)+1:])
	}
	return []byte(path)
}

// span maps a key range [key, end): end empty is the one key, "\x00" every
// key from key on (clamped to key's prefix); key "\x00" with a relative
// or "\x00" end starts at the default prefix's first key.
func (k keyspace) span(key, end []byte) (keySpan, error) {
	if len(end) == 0 {
		p, err := k.path(key)
		if err != nil {
			return keySpan{}, err
		}
		return keySpan{Start: p.Path, Rel: p.Rel, Prefix: p.Prefix, Root: p.Path}, nil
	}
	if len(key) == 0 {
		return keySpan{}, rpctypes.ErrGRPCEmptyKey
	}
	start, stop, floor, rel, err := k.bounds(key, end)
	if err != nil {
		return keySpan{}, err
	}
	return k.clamp(key, start, stop, floor, rel)
}

// bounds are a range's bounds in path space and the path it may not
// leave ("": the one served prefix it touches): the default prefix for
// a relative range, the key's top-level prefix for one from a key on.
// A range from an absolute key covers absolute keys only (it ends at
// "0" at the latest, past every path).
func (k keyspace) bounds(key, end []byte) (start, stop, floor string, rel bool, err error) {
	fromKey := len(end) == 1 && end[0] == 0
	if key[0] == '/' {
		start = string(key)
		if !fromKey {
			return start, min(string(end), "0"), "", false, nil // "0": past every absolute key
		}
		// From key on, within the key's own top-level prefix.
		trimmed := strings.TrimSuffix(start, "/")
		if api.ValidatePath(trimmed) != nil {
			return "", "", "", false, k.refuse(key, "a range from a key on starts within a served prefix")
		}
		top := api.Prefix(trimmed)
		return start, top + "0", top, false, nil
	}
	if k.def == "" {
		return "", "", "", true, k.refuse(key, "keys without a leading \"/\" are refused: this gateway has no default prefix")
	}
	if len(key) == 1 && key[0] == 0 {
		key = nil
	}
	start, stop = k.def+"/"+string(key), k.def+"0"
	if !fromKey {
		stop = k.def + "/" + string(end)
	}
	return start, stop, k.def, true, nil
}

// clamp cuts [start, stop) to the one served prefix it touches (the
// default prefix's subtree for a relative range), refuses it if it
// touches two or none, and finds its root.
func (k keyspace) clamp(key []byte, start, stop, floor string, rel bool) (keySpan, error) {
	n := spanPrefixes(k.be.Prefixes(), start, stop)
	if len(n) > 1 {
		return keySpan{}, status.Errorf(codes.FailedPrecondition,
			"a range over two cells (prefixes %s) is not served: each prefix is its own cell; range within one prefix", strings.Join(n, ", "))
	}
	if floor == "" && len(n) == 1 {
		floor = n[0]
	}
	info, ok := k.be.Prefix(floor)
	if floor == "" || !ok {
		return keySpan{}, k.refuse(key, "the range lies outside every served prefix")
	}
	if start < floor {
		start = floor
	}
	if top := floor + "0"; stop == "" || stop > top {
		stop = top // "0" follows "/": past every path under floor
	}
	return keySpan{Start: start, End: stop, Rel: rel, Prefix: info, Root: spanRoot(start, stop, floor)}, nil
}

// spanPrefixes are the served prefixes with a path in [start, stop).
func spanPrefixes(prefixes []string, start, stop string) []string {
	var out []string
	for _, q := range prefixes {
		self := start <= q && (stop == "" || stop > q)
		below := start < q+"0" && (stop == "" || stop > q+"/")
		if self || below {
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return out
}

// spanRoot is the deepest path at or below floor every path in
// [start, stop) is or lies under.
func spanRoot(start, stop, floor string) string {
	for i := len(start); i > len(floor); i-- {
		if i < len(start) && start[i] != '/' {
			continue
		}
		a := start[:i]
		if api.ValidatePath(a) != nil {
			continue
		}
		exact := start == a && stop == a+"\x00"
		if exact || (start >= a+"/" && stop <= a+"0") {
			return a
		}
	}
	return floor
}

// refuse answers a key that cannot be mapped, naming the rules and the
// served prefixes.
func (k keyspace) refuse(key []byte, why string) error {
	def := "none"
	if k.def != "" {
		def = k.def
	}
	ps := k.be.Prefixes()
	sort.Strings(ps)
	return status.Errorf(codes.InvalidArgument, "key %q: %s; %s (default prefix %s; served prefixes: %s)",
		truncKey(key), why, pathRules, def, strings.Join(ps, ", "))
}

// truncKey shortens a key for a message.
func truncKey(key []byte) string {
	const max = 128 // bytes of a key a message quotes
	if len(key) > max {
		return string(key[:max]) + "..."
	}
	return string(key)
}
