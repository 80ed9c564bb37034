package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/lockservice/lockd/api"
)

// cmpOps are the four compare operators.
var cmpOps = []api.TxnCmp{api.CmpEqual, api.CmpNotEqual, api.CmpLess, api.CmpGreater}

// wantCmp is whether op holds of have against want (the plain order).
func wantCmp(op api.TxnCmp, have, want uint64) bool {
	switch op {
	case api.CmpEqual:
		return have == want
	case api.CmpNotEqual:
		return have != want
	case api.CmpLess:
		return have < want
	}
	return have > want
}

// compareCase is one compare and whether it must hold.
type compareCase struct {
	name string
	cond api.TxnCond
	want bool
}

// checkCompare applies a txn guarded by c writing /demo/out, and fails
// unless it applied (want) or was refused condition_failed naming
// condition 1, changing nothing.
func checkCompare(t *testing.T, h *harness, c compareCase) {
	t.Helper()
	cmd := txnCmd([]api.TxnCond{c.cond}, tput("/demo/out", c.name))
	if c.want {
		if r := h.ok(cmd); len(r.TxnNodes) != 1 {
			t.Fatalf("%s: applied with %d nodes", c.name, len(r.TxnNodes))
		}
		return
	}
	before := snapNoIndex(t, h.s)
	r := h.fail(cmd, api.CodeConditionFailed)
	if r.FailedIf != 1 || r.FailedThen != 0 || !bytes.Equal(before, snapNoIndex(t, h.s)) {
		t.Fatalf("%s: refused naming if %d, then %d (or changed the state): %v", c.name, r.FailedIf, r.FailedThen, r.Err)
	}
}

// numericCases are every operator against targets below, at and above
// have (below only if have > 0), for a compare of kind on path whose
// operand set sets.
func numericCases(label string, kind api.TxnCondKind, path string, have uint64, set func(*api.TxnCond, uint64)) []compareCase {
	targets := []uint64{have, have + 1, have + 1<<50}
	if have > 0 {
		targets = append(targets, have-1, 0)
	}
	var out []compareCase
	for _, op := range cmpOps {
		for _, w := range targets {
			k := api.TxnCond{If: kind, Path: path, Cmp: op}
			set(&k, w)
			out = append(out, compareCase{fmt.Sprintf("%s %s %s %d", label, kind, op, w), k, wantCmp(op, have, w)})
		}
	}
	return out
}

// TestTxnCompares: every compare kind with every operator, on a missing
// node, a present one, an ephemeral one and a container, by etcd's rules:
// a missing node's (and a container's) revisions, version and owner are
// 0; a value compare of a missing node never holds, whatever its
// operator; revisions are tokens under the prefix's epoch; values compare
// as bytes. The mutant TxnValueMissing fails it.
func TestTxnCompares(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	created := h.ok(putCmd("/demo/p", "m", nil)).Index
	modified := h.ok(putCmd("/demo/p", "mm", nil)).Index
	eph := h.ok(ephCmd(sess, "/demo/e")).Index
	h.ok(Command{Op: OpCreate, Path: "/demo/c/x", MakeParents: true, Container: true})
	if n, _ := h.s.Get("/demo/c"); !n.Container {
		t.Fatal("/demo/c is not a container")
	}
	rev := func(i uint64) uint64 { return api.MakeToken(1, i) }
	setRev := func(k *api.TxnCond, w uint64) { k.Rev = w }
	setVer := func(k *api.TxnCond, w uint64) { k.Version = w }
	setOwner := func(k *api.TxnCond, w uint64) { k.Owner = w }

	var cases []compareCase
	for _, m := range []struct{ label, path string }{{"missing", "/demo/none"}, {"container", "/demo/c"}} {
		cases = append(cases, numericCases(m.label, api.CondCreateRev, m.path, 0, setRev)...)
		cases = append(cases, numericCases(m.label, api.CondModRev, m.path, 0, setRev)...)
		cases = append(cases, numericCases(m.label, api.CondVersionCmp, m.path, 0, setVer)...)
		cases = append(cases, numericCases(m.label, api.CondOwner, m.path, 0, setOwner)...)
		for _, op := range cmpOps {
			for _, v := range []string{"", "a", "\xff"} {
				cases = append(cases, compareCase{fmt.Sprintf("%s value %s %q", m.label, op, v),
					api.TxnCond{If: api.CondValue, Path: m.path, Cmp: op, Value: []byte(v)}, false})
			}
		}
	}
	cases = append(cases, numericCases("present", api.CondCreateRev, "/demo/p", rev(created), setRev)...)
	cases = append(cases, numericCases("present", api.CondModRev, "/demo/p", rev(modified), setRev)...)
	cases = append(cases, numericCases("present", api.CondVersionCmp, "/demo/p", 2, setVer)...)
	cases = append(cases, numericCases("persistent", api.CondOwner, "/demo/p", 0, setOwner)...)
	cases = append(cases, numericCases("ephemeral", api.CondOwner, "/demo/e", sess, setOwner)...)
	cases = append(cases, numericCases("ephemeral", api.CondCreateRev, "/demo/e", rev(eph), setRev)...)
	for _, op := range cmpOps {
		for v, order := range map[string]int{"mm": 0, "m": 1, "mmm": -1, "n": -1, "": 1, "M": 1} {
			cases = append(cases, compareCase{fmt.Sprintf("present value %s %q", op, v),
				api.TxnCond{If: api.CondValue, Path: "/demo/p", Cmp: op, Value: []byte(v)},
				wantCmp(op, uint64(order+1), 1)})
		}
		cases = append(cases, compareCase{fmt.Sprintf("ephemeral empty value %s \"\"", op),
			api.TxnCond{If: api.CondValue, Path: "/demo/e", Cmp: op}, wantCmp(op, 0, 0)})
	}
	for _, c := range cases {
		checkCompare(t, h, c)
	}
	// The first failing condition of several is the one named.
	r := h.fail(txnCmd([]api.TxnCond{
		{If: api.CondCreateRev, Path: "/demo/none", Cmp: api.CmpEqual},
		{If: api.CondValue, Path: "/demo/none", Cmp: api.CmpEqual},
	}, tput("/demo/out", "x")), api.CodeConditionFailed)
	if r.FailedIf != 2 {
		t.Fatalf("failed if %d, want 2", r.FailedIf)
	}
}

// TestTxnCompareEpoch: revisions compare as tokens under the prefix's
// directory epoch. After the epoch rises (a move), a revision read under
// the old epoch is not the node's revision and compares below it, though
// its index is the same. The mutant TxnRevEpoch fails it.
func TestTxnCompareEpoch(t *testing.T) {
	h := newDemo(t)
	i := h.ok(putCmd("/demo/k", "v", nil)).Index
	old, later := api.MakeToken(1, i), api.MakeToken(1, i+1000)
	checkCompare(t, h, compareCase{"epoch 1 create", api.TxnCond{If: api.CondCreateRev, Path: "/demo/k", Cmp: api.CmpEqual, Rev: old}, true})
	h.ok(ensureCmd("/demo", 2))
	cur := api.MakeToken(2, i)
	for _, c := range []compareCase{
		{"old epoch create =", api.TxnCond{If: api.CondCreateRev, Path: "/demo/k", Cmp: api.CmpEqual, Rev: old}, false},
		{"old epoch mod =", api.TxnCond{If: api.CondModRev, Path: "/demo/k", Cmp: api.CmpEqual, Rev: old}, false},
		{"old epoch mod !=", api.TxnCond{If: api.CondModRev, Path: "/demo/k", Cmp: api.CmpNotEqual, Rev: old}, true},
		{"old epoch later index <", api.TxnCond{If: api.CondModRev, Path: "/demo/k", Cmp: api.CmpLess, Rev: later}, false},
		{"old epoch later index >", api.TxnCond{If: api.CondModRev, Path: "/demo/k", Cmp: api.CmpGreater, Rev: later}, true},
		{"new epoch create =", api.TxnCond{If: api.CondCreateRev, Path: "/demo/k", Cmp: api.CmpEqual, Rev: cur}, true},
		{"new epoch mod =", api.TxnCond{If: api.CondModRev, Path: "/demo/k", Cmp: api.CmpEqual, Rev: cur}, true},
	} {
		checkCompare(t, h, c)
	}
}

// TestTxnCompareShape: a compare without a known operator, with another
// kind's operand, or an operand on a non-compare kind is refused
// bad_request, changing nothing; compare values count against
// MaxTxnValueBytes.
func TestTxnCompareShape(t *testing.T) {
	h := newDemo(t)
	big := bytes.Repeat([]byte("x"), api.MaxTxnValueBytes/2+1)
	for _, tc := range []struct {
		name string
		cond api.TxnCond
		put  []byte
		code api.Code
	}{
		{"no operator", api.TxnCond{If: api.CondModRev, Path: "/demo/a"}, nil, api.CodeBadRequest},
		{"unknown operator", api.TxnCond{If: api.CondModRev, Path: "/demo/a", Cmp: ">="}, nil, api.CodeBadRequest},
		{"value on a rev compare", api.TxnCond{If: api.CondModRev, Path: "/demo/a", Cmp: api.CmpEqual, Value: []byte("v")}, nil, api.CodeBadRequest},
		{"rev on a version compare", api.TxnCond{If: api.CondVersionCmp, Path: "/demo/a", Cmp: api.CmpEqual, Rev: 1}, nil, api.CodeBadRequest},
		{"token on a compare", api.TxnCond{If: api.CondOwner, Path: "/demo/a", Cmp: api.CmpEqual, Token: 1}, nil, api.CodeBadRequest},
		{"operator on exists", api.TxnCond{If: api.CondExists, Path: "/demo/a", Cmp: api.CmpEqual}, nil, api.CodeBadRequest},
		{"value on missing", api.TxnCond{If: api.CondMissing, Path: "/demo/a", Value: []byte("v")}, nil, api.CodeBadRequest},
		{"owner on holds", api.TxnCond{If: api.CondHolds, Path: "/demo/a", Owner: 3}, nil, api.CodeBadRequest},
		{"values over the bound", api.TxnCond{If: api.CondValue, Path: "/demo/a", Cmp: api.CmpEqual, Value: big}, big, api.CodeValueTooLarge},
		{"bad path", api.TxnCond{If: api.CondValue, Path: "demo", Cmp: api.CmpEqual}, nil, api.CodeInvalidPath},
	} {
		before := snapNoIndex(t, h.s)
		r := h.apply(txnCmd([]api.TxnCond{tc.cond}, tput("/demo/out", string(tc.put))))
		if errCode(r) != tc.code || len(h.changes) != 0 || !bytes.Equal(before, snapNoIndex(t, h.s)) {
			t.Fatalf("%s: %v, want %s and no change", tc.name, r.Err, tc.code)
		}
	}
}

// TestTxnCodecGate: a transaction with a compare, or a write with
// container or uncontain, and a put with either, need log codec 3; a cell
// below it refuses them codec_too_old; other transactions need 2, other
// puts nothing.
func TestTxnCodecGate(t *testing.T) {
	put := api.TxnOp{Op: api.TxnPut, Path: "/demo/a"}
	txn := func(k api.TxnCondKind, o api.TxnOp) api.TxnRequest {
		r := api.TxnRequest{Then: []api.TxnOp{o}}
		if k != "" {
			r.If = []api.TxnCond{{If: api.CondExists, Path: "/demo/b"}, {If: k, Path: "/demo/b", Cmp: api.CmpEqual}}
		}
		return r
	}
	withFlags := func(container, uncontain bool) api.TxnOp {
		o := put
		o.MakeParents, o.Container, o.Uncontain = container, container, uncontain
		return o
	}
	for _, tc := range []struct {
		name string
		req  api.TxnRequest
		want LogCodec
	}{
		{"plain", txn("", put), LogCodecV2},
		{"holds", txn(api.CondHolds, put), LogCodecV2},
		{"version", txn(api.CondVersion, put), LogCodecV2},
		{"create_rev", txn(api.CondCreateRev, put), LogCodecV3},
		{"mod_rev", txn(api.CondModRev, put), LogCodecV3},
		{"version_cmp", txn(api.CondVersionCmp, put), LogCodecV3},
		{"value", txn(api.CondValue, put), LogCodecV3},
		{"owner", txn(api.CondOwner, put), LogCodecV3},
		{"container write", txn("", withFlags(true, false)), LogCodecV3},
		{"uncontain write", txn("", withFlags(false, true)), LogCodecV3},
	} {
		got, what := TxnCodec(&tc.req)
		if got != tc.want || what == "" {
			t.Errorf("%s: needs codec %d (%q), want %d", tc.name, got, what, tc.want)
		}
		for have := LogCodecJSON; have <= LogCodecNewest; have++ {
			err := NeedCodec(have, got, what)
			if tooOld := have < tc.want; (err != nil) != tooOld || (err != nil && err.Code != api.CodeCodecTooOld) {
				t.Errorf("%s at codec %d: %v", tc.name, have, err)
			}
		}
	}
	for _, tc := range []struct {
		req  api.PutRequest
		want LogCodec
	}{
		{api.PutRequest{Path: "/demo/a", MakeParents: true}, LogCodecJSON},
		{api.PutRequest{Path: "/demo/a", MakeParents: true, Container: true}, LogCodecV3},
		{api.PutRequest{Path: "/demo/a", Uncontain: true}, LogCodecV3},
	} {
		if got, _ := PutCodec(&tc.req); got != tc.want {
			t.Errorf("put %+v needs codec %d, want %d", tc.req, got, tc.want)
		}
	}
	if LogCodecNewest != LogCodecV4 {
		t.Fatalf("newest codec %d, want 4", LogCodecNewest)
	}
}
