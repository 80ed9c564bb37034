package check

import "testing"

// TestCheckGuarded: the checker passes a history of holders writing in
// token order with every stale write refused, and flags a stale write
// accepted and a superseded token committing after its successor.
func TestCheckGuarded(t *testing.T) {
	good := []GuardedWrite{
		{Writer: "a", Lock: "/l", Token: 5, Index: 10, Accepted: true},
		{Writer: "a", Lock: "/l", Token: 5, Index: 12, Accepted: true},
		{Writer: "a", Lock: "/l", Token: 5, Stale: true},
		{Writer: "b", Lock: "/l", Token: 20, Index: 30, Accepted: true},
	}
	for _, tc := range []struct {
		name string
		ws   []GuardedWrite
		want int
	}{
		{"good", good, 0},
		{"stale accepted", append(append([]GuardedWrite{}, good...), GuardedWrite{Writer: "b", Lock: "/l", Token: 20, Index: 40, Accepted: true, Stale: true}), 1},
		{"superseded after successor", append(append([]GuardedWrite{}, good...), GuardedWrite{Writer: "a", Lock: "/l", Token: 5, Index: 31, Accepted: true}), 1},
		{"stale and superseded", append(append([]GuardedWrite{}, good...), GuardedWrite{Writer: "a", Lock: "/l", Token: 5, Index: 31, Accepted: true, Stale: true}), 2},
	} {
		n, vs := CheckGuarded(tc.ws)
		if n != len(tc.ws) || len(vs) != tc.want {
			t.Errorf("%s: checked %d, violations %v, want %d", tc.name, n, vs, tc.want)
		}
	}
}
