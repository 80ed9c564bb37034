package chaos

import (
	"context"
	"errors"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk/fence"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// TestResourceFencing drives the real resource, fence on, through a
// takeover. When the old holder's lock Context had ended before its late
// write (a correct service and SDK), the refusal is the fence doing its
// job and the fencing checker passes. When the old holder still believed
// it held (what a lock service or SDK that granted the new holder early
// produces), the same refusal is a violation: the check is about the lock
// service, not about the fence, which worked in both runs.
func TestResourceFencing(t *testing.T) {
	const lock = "/demo/chaos/locks/l0"
	grants := []check.Grant{
		{Lock: lock, Node: lock + "/w-0000000001", Mode: api.LockExclusive, Token: api.MakeToken(1, 10), Session: 5, Owner: 5, CreateIndex: 10, Epoch: 1},
		{Lock: lock, Node: lock + "/w-0000000002", Mode: api.LockExclusive, Token: api.MakeToken(1, 20), Session: 6, Owner: 6, CreateIndex: 20, Epoch: 1},
	}
	obs := []check.LockObs{
		{Lock: lock, Node: lock + "/w-0000000001", Index: 11, Held: true},
		{Lock: lock, Node: lock + "/w-0000000002", Index: 25, Held: true},
	}
	for _, tc := range []struct {
		name      string
		oldLive   bool
		wantFound int
	}{{"old holder's Context ended", false, 0}, {"old holder still live (early grant)", true, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			h := check.NewHistory()
			r := NewResource(h)
			oldCtx, endOld := context.WithCancel(context.Background())
			defer endOld()
			live := context.Background()
			if err := r.Write(lock, api.MakeToken(1, 10), 5, "old", oldCtx); err != nil {
				t.Fatal(err)
			}
			if !tc.oldLive {
				endOld()
			}
			if err := r.Write(lock, api.MakeToken(1, 20), 6, "new", live); err != nil {
				t.Fatal(err)
			}
			if err := r.Write(lock, api.MakeToken(1, 10), 5, "old", oldCtx); !errors.Is(err, fence.ErrStaleToken) {
				t.Fatalf("late write: %v, want stale", err)
			}
			ws := h.Snapshot().Writes
			if len(ws) != 3 || ws[2].Accepted {
				t.Fatalf("recorded %+v", ws)
			}
			_, vs := check.CheckFencing(ws, grants, obs)
			if len(vs) != tc.wantFound {
				t.Fatalf("%d violations, want %d: %v", len(vs), tc.wantFound, vs)
			}
			for _, v := range vs {
				t.Logf("found: %s", v.Detail)
			}
		})
	}
}
