package fsm

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// rangePaths is the paths of a range answer's nodes.
func rangePaths(r api.RangeResponse) string {
	out := make([]string, 0, len(r.Nodes))
	for _, n := range r.Nodes {
		out = append(out, n.Path)
	}
	return strings.Join(out, " ")
}

// TestRange: nodes in byte order of path (not tree order: "/demo/a-b"
// sorts before "/demo/a/x"), limit with more and the full count, keys
// and count only, containers skipped, a single key.
func TestRange(t *testing.T) {
	h := newDemo(t)
	put := map[string]bool{}
	for _, p := range []string{"/demo/a", "/demo/a/x", "/demo/a/y", "/demo/a-b", "/demo/b", "/demo/c"} {
		h.ok(putCmd(p, "v"+p, nil))
		put[p] = true
	}
	sess := h.open()
	h.ok(recipeLock(sess, "/demo/q/lock", ex, 0)) // containers /demo/q, /demo/q/lock
	all := RangeOptions{Limit: api.MaxRangeKeys}
	cases := []struct {
		name       string
		start, end string
		opt        RangeOptions
		want       string
		count      int
		more       bool
	}{
		{"byte order", "/demo/a", "/demo/b", all, "/demo/a /demo/a-b /demo/a/x /demo/a/y", 4, false},
		{"whole prefix", "/demo", "/demo0", RangeOptions{Limit: 3}, "/demo /demo/a /demo/a-b", 10, true},
		{"end excluded", "/demo/a/x", "/demo/a/y", all, "/demo/a/x", 1, false},
		{"single key", "/demo/b", "", all, "/demo/b", 1, false},
		{"missing key", "/demo/zz", "", all, "", 0, false},
		{"empty span", "/demo/d", "/demo/e", all, "", 0, false},
		{"containers skipped", "/demo/q", "/demo/q0", RangeOptions{Limit: 10, SkipContainers: true}, "/demo/q/lock/lock-0000000000", 1, false},
		{"containers kept", "/demo/q", "/demo/q/lock0", RangeOptions{Limit: 2, KeysOnly: true}, "/demo/q /demo/q/lock", 3, true},
		{"count only", "/demo/a", "/demo/c", RangeOptions{Limit: 10, CountOnly: true}, "", 5, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := h.s.Range(tc.start, tc.end, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if got := rangePaths(r); got != tc.want || r.Count != tc.count || r.More != tc.more {
				t.Fatalf("got [%s] count %d more %v, want [%s] %d %v", got, r.Count, r.More, tc.want, tc.count, tc.more)
			}
			for _, n := range r.Nodes {
				want := ""
				if put[n.Path] && !tc.opt.KeysOnly {
					want = "v" + n.Path
				}
				if string(n.Value) != want {
					t.Fatalf("%s: value %q with keys_only %v, want %q", n.Path, n.Value, tc.opt.KeysOnly, want)
				}
			}
		})
	}
}

// TestRangeScanBound: a range visiting more than its scan bound
// (api.MaxRangeScan; here a small one) is refused naming the bound, and
// one that prunes a large subtree to the few nodes it needs is answered.
func TestRangeScanBound(t *testing.T) {
	h := newDemo(t)
	const dirs, per, bound = 10, 100, 500
	for d := 0; d < dirs; d++ {
		dir := fmt.Sprintf("/demo/d%03d", d)
		h.ok(createCmd(dir))
		for i := 0; i < per; i++ {
			p := fmt.Sprintf("%s/k%04d", dir, i)
			h.s.link(h.idx, &node{path: p, parent: h.s.nodes[dir], version: 1}) // fast: the range reads nodes only
		}
	}
	_, _, err := h.s.scan(h.s.spanRoot("/demo", "/demo0", "/demo"), "/demo", "/demo0", bound)
	if err == nil || err.Code != api.CodeLimitExceeded || !strings.Contains(err.Message, "MaxRangeScan") {
		t.Fatalf("range over %d nodes: %v, want limit_exceeded naming MaxRangeScan", h.s.NumNodes(), err)
	}
	found, _, err := h.s.scan(h.s.spanRoot("/demo/d007/k0010", "/demo/d007/k0020", "/demo"), "/demo/d007/k0010", "/demo/d007/k0020", per+dirs)
	if err != nil || len(found) != 10 {
		t.Fatalf("a narrow range: %d nodes, err %v", len(found), err)
	}
	r, err := h.s.Range("/demo", "/demo0", RangeOptions{Limit: 10, CountOnly: true})
	if err != nil || r.Count != 1+dirs+dirs*per || len(r.Nodes) != 0 {
		t.Fatalf("count only: %d, %d nodes, err %v", r.Count, len(r.Nodes), err)
	}
}

// TestRanges: spans read together answer as each read alone; their scans
// share one MaxRangeScan (many spans over one large subtree are refused
// though each alone is answered), and their values one MaxRangeBytes.
func TestRanges(t *testing.T) {
	h := newDemo(t)
	for _, p := range []string{"/demo/a", "/demo/a/x", "/demo/b"} {
		h.ok(putCmd(p, "v"+p, nil))
	}
	all := RangeOptions{Limit: api.MaxRangeKeys}
	spans := []RangeSpan{{"/demo/a", "", all}, {"/demo/a", "/demo/b", all}, {"/demo/zz", "", all}, {"/demo", "/demo0", RangeOptions{Limit: 1, KeysOnly: true}}}
	got, err := h.s.Ranges(spans)
	if err != nil || len(got) != len(spans) {
		t.Fatalf("ranges: %d answers, err %v", len(got), err)
	}
	for i, sp := range spans {
		alone, err := h.s.Range(sp.Start, sp.End, sp.Opt)
		if err != nil || rangePaths(alone) != rangePaths(got[i]) || alone.Count != got[i].Count || alone.More != got[i].More {
			t.Fatalf("span %d: together [%s] %d %v, alone [%s] %d %v (%v)", i, rangePaths(got[i]), got[i].Count, got[i].More, rangePaths(alone), alone.Count, alone.More, err)
		}
	}
	// One scan budget: a span visiting MaxRangeScan/2+ nodes is read
	// alone, twice together it is refused.
	h.ok(createCmd("/demo/big"))
	for i := 0; i < api.MaxRangeScan/2+10; i++ {
		p := fmt.Sprintf("/demo/big/k%06d", i)
		h.s.link(h.idx, &node{path: p, parent: h.s.nodes["/demo/big"], version: 1})
	}
	big := RangeSpan{"/demo/big", "/demo/big0", RangeOptions{Limit: 1, CountOnly: true}}
	if _, err := h.s.Ranges([]RangeSpan{big}); err != nil {
		t.Fatalf("one large span: %v", err)
	}
	if _, err := h.s.Ranges([]RangeSpan{big, big}); err == nil || err.Code != api.CodeLimitExceeded || !strings.Contains(err.Message, "2 ranges read together visit more than 100000 nodes (MaxRangeScan)") {
		t.Fatalf("two large spans together: %v, want limit_exceeded naming MaxRangeScan", err)
	}
	// One bound on nodes returned: keys-only spans of 6 000 nodes each.
	keys := RangeSpan{"/demo/big/k000000", "/demo/big/k006000", RangeOptions{Limit: 6000, KeysOnly: true}}
	if _, err := h.s.Ranges([]RangeSpan{keys}); err != nil {
		t.Fatalf("6 000 nodes: %v", err)
	}
	if _, err := h.s.Ranges([]RangeSpan{keys, keys}); err == nil || err.Code != api.CodeLimitExceeded || !strings.Contains(err.Message, "MaxRangeKeys") {
		t.Fatalf("12 000 nodes: %v, want limit_exceeded naming MaxRangeKeys", err)
	}
	// One byte budget: 100 values of 60 KiB (6 MB), read once and twice.
	for i := 0; i < 100; i++ {
		h.ok(putCmd(fmt.Sprintf("/demo/v%03d", i), strings.Repeat("x", 60<<10), nil))
	}
	v := RangeSpan{"/demo/v", "/demo/v999", all}
	if _, err := h.s.Ranges([]RangeSpan{v}); err != nil {
		t.Fatalf("6 MB of values: %v", err)
	}
	if _, err := h.s.Ranges([]RangeSpan{v, v}); err == nil || err.Code != api.CodeLimitExceeded || !strings.Contains(err.Message, "MaxRangeBytes") {
		t.Fatalf("12 MB of values: %v, want limit_exceeded naming MaxRangeBytes", err)
	}
}

// TestRangeStaysUnderRoot: a read answers only nodes at or under its
// root, whatever its span: [root, root+"0") in byte order also holds
// root's siblings named root and a character before '/' ("/demo/pub-
// secret" for "/demo/pub"), which a tenant allowed to read root must
// not see, whether root exists (the scan starts there) or not (it would
// start at root's parent). Mutant lockd_broken_range_root: the whole
// span.
func TestRangeStaysUnderRoot(t *testing.T) {
	h := newDemo(t)
	for _, p := range []string{"/demo/pub-secret", "/demo/pub.bak", "/demo/pub!x", "/demo/other", "/demo/other/pub"} {
		h.ok(putCmd(p, "s3cret", nil))
	}
	read := func(root, start, end string) string {
		t.Helper()
		r, err := h.s.Range(start, end, RangeOptions{Limit: api.MaxRangeKeys, Root: root})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := h.s.Ranges([]RangeSpan{{Start: start, End: end, Opt: RangeOptions{Limit: api.MaxRangeKeys, Root: root}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := rangePaths(rs[0]); got != rangePaths(r) || rs[0].Count != r.Count {
			t.Fatalf("Ranges [%s] (%d), Range [%s] (%d): not the same", got, rs[0].Count, rangePaths(r), r.Count)
		}
		if len(r.Nodes) != r.Count {
			t.Fatalf("count %d for [%s]", r.Count, rangePaths(r))
		}
		return rangePaths(r)
	}
	for _, tc := range []struct {
		name, root, start, end, want string
	}{
		{"root missing, its whole span", "/demo/pub", "/demo/pub", "/demo/pub0", ""},
		{"root missing, the span past it", "/demo/pub", "/demo/pub", "/demo/pub/", ""},
		{"root missing, one sibling named", "/demo/pub", "/demo/pub-secret", "", ""},
		{"no root: the byte span", "", "/demo/pub", "/demo/pub0", "/demo/pub!x /demo/pub-secret /demo/pub.bak"},
	} {
		if got := read(tc.root, tc.start, tc.end); got != tc.want {
			t.Errorf("%s: [%s], want [%s]", tc.name, got, tc.want)
		}
	}
	h.ok(putCmd("/demo/pub", "mine", nil))
	h.ok(putCmd("/demo/pub/a", "mine", nil))
	if got := read("/demo/pub", "/demo/pub", "/demo/pub0"); got != "/demo/pub /demo/pub/a" {
		t.Errorf("root there, its whole span: [%s], want [/demo/pub /demo/pub/a]", got)
	}
}

// TestRangeProperty: random trees with names holding bytes around
// '/', random roots and spans a lockd would admit (checkUnder): the answer
// is exactly the nodes at or under root in the span, nothing else (from
// the second attack on the range reads; it found the start's siblings
// left out, TestRangeKeepsStartsSiblings).
func TestRangeProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(7)) // math/rand: a fixed seed
	alpha := []string{"a", "a-", "a.", "a!", "a0", "b", "a/", "-", ".", "0", "\x7f", "é"}
	for iter := 0; iter < 300; iter++ {
		h := newDemo(t)
		var paths []string
		for i := 0; i < 40; i++ {
			p := "/demo"
			depth := 1 + rng.Intn(3)
			for d := 0; d < depth; d++ {
				seg := ""
				for seg == "" || strings.Contains(seg, "/") {
					seg = strings.TrimSuffix(alpha[rng.Intn(len(alpha))], "/")
				}
				p += "/" + seg
			}
			if api.ValidatePath(p) != nil {
				continue
			}
			r := h.apply(Command{Op: OpPut, Path: p, Value: []byte("v"), MakeParents: true, Container: true})
			_ = r
		}
		for p := range h.s.nodes {
			if p != "/" {
				paths = append(paths, p)
			}
		}
		sort.Strings(paths)
		cands := append([]string{}, paths...)
		cands = append(cands, "/demo/a", "/demo/a-", "/demo/zz", "/demo/a/a", "/demo")
		for q := 0; q < 60; q++ {
			root := cands[rng.Intn(len(cands))]
			// a start at or under root
			var unders []string
			for _, p := range append(cands, root+"/", root+"/a", root+"/\x00") {
				if p == root || strings.HasPrefix(p, root+"/") {
					unders = append(unders, p)
				}
			}
			start := unders[rng.Intn(len(unders))]
			end := ""
			switch rng.Intn(3) {
			case 1:
				end = root + "0"
			case 2:
				e := unders[rng.Intn(len(unders))]
				if e > start {
					end = e
				}
			}
			for _, skip := range []bool{false, true} {
				r, err := h.s.Range(start, end, RangeOptions{Limit: api.MaxRangeKeys, Root: root, SkipContainers: skip})
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, p := range paths {
					in := p == start
					if end != "" {
						in = p >= start && p < end
					}
					if in && (p == root || strings.HasPrefix(p, root+"/")) && !(skip && h.s.nodes[p].container) {
						want = append(want, p)
					}
				}
				if got := rangePaths(r); got != strings.Join(want, " ") || r.Count != len(want) {
					t.Fatalf("root %q [%q, %q) skip %v: got [%s] %d, want [%s]", root, start, end, skip, got, r.Count, strings.Join(want, " "))
				}
			}
		}
	}
}

// TestRangeKeepsStartsSiblings: a span starting at an existing node q
// and ending at or before q+"0" holds q's siblings q-x, q.x in byte
// order, which lie under the read's root unless q is the root: they are
// answered (spanRoot scanned from q alone and left them out of Nodes and
// Count).
func TestRangeKeepsStartsSiblings(t *testing.T) {
	h := newDemo(t)
	for _, p := range []string{"/demo/a", "/demo/a-b", "/demo/a.c", "/demo/a/x"} {
		h.ok(putCmd(p, "v", nil))
	}
	for _, root := range []string{"/demo", ""} {
		for _, end := range []string{"/demo/a0", "/demo/a/"} {
			r, err := h.s.Range("/demo/a", end, RangeOptions{Limit: 100, Root: root})
			if err != nil {
				t.Fatal(err)
			}
			want := "/demo/a /demo/a-b /demo/a.c /demo/a/x"
			if end == "/demo/a/" {
				want = "/demo/a /demo/a-b /demo/a.c"
			}
			if got := rangePaths(r); got != want {
				t.Errorf("root %q [/demo/a, %s): [%s] count %d, want [%s]", root, end, got, r.Count, want)
			}
		}
	}
}
