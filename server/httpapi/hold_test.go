package httpapi

import (
	"fmt"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cell"
)

// Only the cell's own refusal for a prefix it does not serve yet may be
// held and run again: every other answer is final, and Raft's unavailable
// (a timeout) may still apply.
func TestNotServedYet(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		hold bool
	}{
		{"state: wrong_cell", &cell.Refusal{Err: api.Errorf(api.CodeWrongCell, "not here")}, true},
		{"state: a copy arriving", &cell.Refusal{Err: api.Errorf(api.CodeUnavailable, "staging")}, true},
		{"state: moved", &cell.Refusal{Err: api.Errorf(api.CodeMoved, "gone")}, false},
		{"state: no_node", &cell.Refusal{Err: api.Errorf(api.CodeNoNode, "missing")}, false},
		{"state: version_mismatch, wrapped", fmt.Errorf("x: %w", &cell.Refusal{Err: api.Errorf(api.CodeVersionMismatch, "v")}), false},
		{"raft: unavailable (timeout)", api.Errorf(api.CodeUnavailable, "timeout"), false},
		{"raft: wrong_cell (shard not here)", api.Errorf(api.CodeWrongCell, "shard"), false},
		{"nil", nil, false},
	} {
		if got := notServedYet(tc.err); got != tc.hold {
			t.Errorf("%s: held %v, want %v", tc.name, got, tc.hold)
		}
	}
}
