package httpapi

import (
	"fmt"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cell"
)

// TestMarkNotApplied: only the cell state's own unavailable refusal is
// marked not_applied (a client may resend the write); Raft's unavailable
// (a timed-out proposal may still apply) and other codes are not.
func TestMarkNotApplied(t *testing.T) {
	unavail := api.Errorf(api.CodeUnavailable, "prefix /p is moving to this cell and not served yet")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"the state's unavailable refusal", &cell.Refusal{Err: unavail}, true},
		{"the refusal wrapped", fmt.Errorf("put: %w", &cell.Refusal{Err: unavail}), true},
		{"Raft's unavailable (a proposal timed out)", api.Errorf(api.CodeUnavailable, "timeout"), false},
		{"the state's refusal of another code", &cell.Refusal{Err: api.Errorf(api.CodeNoNode, "no node")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ae := api.AsError(tc.err)
			got := markNotApplied(ae, tc.err)
			if got.NotApplied != tc.want {
				t.Fatalf("not_applied %v, want %v", got.NotApplied, tc.want)
			}
			if ae.NotApplied && !tc.want || got.Code != ae.Code || got.Message != ae.Message {
				t.Fatalf("the error changed: %+v from %+v", got, ae)
			}
		})
	}
	if unavail.NotApplied {
		t.Fatal("markNotApplied changed the state's error in place")
	}
}
