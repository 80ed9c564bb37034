package cell

import (
	"testing"

	"github.com/lockservice/lockd/api"
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
