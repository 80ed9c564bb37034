package cell

import (
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// TestBranchRead: a transaction's branch reads answered with it are the
// success branch's when it applied, the else branch's when a condition
// failed, and none when a write failed or none were asked (mutant
// lockd_broken_txn_reads_branch: the success branch's whatever the
// outcome).
func TestBranchRead(t *testing.T) {
	then := []api.RangeRequest{{Root: "/demo/locks", Start: "/demo/locks"}}
	els := []api.RangeRequest{{Root: "/demo/locks/k", Start: "/demo/locks/k"}, {Root: "/demo/locks", Start: "/demo/locks"}}
	r := &TxnReads{Then: then, Else: els, ThenLimits: []int{1}, ElseLimits: []int{2, 3}}
	for _, tc := range []struct {
		name   string
		reads  *TxnReads
		resp   api.TxnResponse
		want   []api.RangeRequest
		limits []int
	}{
		{"applied", r, api.TxnResponse{Succeeded: true, Index: 9}, then, []int{1}},
		{"a condition failed", r, api.TxnResponse{Index: 9, Failed: &api.TxnFailure{Kind: api.TxnFailedIf}}, els, []int{2, 3}},
		{"a write failed", r, api.TxnResponse{Index: 9, Failed: &api.TxnFailure{Kind: api.TxnFailedThen, Code: api.CodeNodeExists}}, nil, nil},
		{"failed, saying nothing", r, api.TxnResponse{Index: 9}, nil, nil},
		{"none asked", nil, api.TxnResponse{Succeeded: true, Index: 9}, nil, nil},
		{"an empty else", &TxnReads{Then: then, ThenLimits: []int{1}}, api.TxnResponse{Failed: &api.TxnFailure{Kind: api.TxnFailedIf}}, nil, nil},
	} {
		got, limits := branchRead(tc.reads, &tc.resp)
		if len(got) != len(tc.want) || len(limits) != len(tc.limits) {
			t.Errorf("%s: reads %v limits %v, want %v %v", tc.name, got, limits, tc.want, tc.limits)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] || limits[i] != tc.limits[i] {
				t.Errorf("%s: read %d %v (limit %d), want %v (%d)", tc.name, i, got[i], limits[i], tc.want[i], tc.limits[i])
			}
		}
	}
}

// TestRangeQueriesStayUnderRoot: a range read, a ranges read and a
// transaction's branch reads (one query) answer only nodes at or under
// each read's root: with the root missing, its span [root, root+"0")
// holds root's siblings "/demo/acme/pub-secret" and "/demo/acme/pub.bak",
// which a tenant allowed to read /demo/acme/pub must not see (mutant
// lockd_broken_range_root).
func TestRangeQueriesStayUnderRoot(t *testing.T) {
	r := newTestReplica(t, 1, nil)
	r.apply(fsm.Command{Op: fsm.OpEnsurePrefix, Path: "/demo", Epoch: 1})
	for _, p := range []string{"/demo/acme/pub-secret", "/demo/acme/pub.bak"} {
		if res := r.apply(fsm.Command{Op: fsm.OpPut, Path: p, Value: []byte("s3cret"), MakeParents: true, Admin: true}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	req := api.RangeRequest{Root: "/demo/acme/pub", Start: "/demo/acme/pub", End: "/demo/acme/pub0"}
	one, err := rangeQuery{req: req, limit: api.MaxRangeKeys}.run(r.m.state)
	if err != nil || len(one.Nodes) != 0 || one.Count != 0 {
		t.Fatalf("range read: %v (%d) %v, want nothing", one.Nodes, one.Count, err)
	}
	many, err := rangesQuery{reqs: []api.RangeRequest{req, req}, limits: []int{api.MaxRangeKeys, 1}}.run(r.m.state)
	if err != nil || len(many.Reads) != 2 {
		t.Fatalf("ranges read: %v %v", many, err)
	}
	for i, rr := range many.Reads {
		if len(rr.Nodes) != 0 || rr.Count != 0 {
			t.Fatalf("ranges read %d: %v (%d), want nothing", i, rr.Nodes, rr.Count)
		}
	}
}
