package lockd

import (
	"context"
	"errors"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cell"
)

// fakeGroup is a cell's Raft group asked for one membership change. If
// the change is in flight (appended by the leader, not yet committed),
// it commits with the next entry that commits after it (a barrier) when
// it lands, or never (it was lost with a deposed leader's log); a
// membership read before then does not show it. That is Raft's log order:
// an entry is committed once a later entry of the same log is.
type fakeGroup struct {
	before, after cell.Members
	committed     bool  // the change is in the group's membership
	inFlight      bool  // appended, not yet committed
	lands         bool  // an in-flight change commits with the next entry
	readErr       error // every membership read fails
	barrierErr    error // every barrier fails
	barriers      int
}

func (f *fakeGroup) Membership(context.Context) (cell.Members, error) {
	if f.readErr != nil {
		return cell.Members{}, f.readErr
	}
	if f.committed {
		return f.after, nil
	}
	return f.before, nil
}

// later is the group some time after: an in-flight change that lands
// has committed.
func (f *fakeGroup) later() {
	if f.inFlight && f.lands {
		f.committed = true
	}
	f.inFlight = false
}

func (f *fakeGroup) Barrier(context.Context) error {
	f.barriers++
	if f.barrierErr != nil {
		return f.barrierErr
	}
	if f.inFlight && f.lands {
		f.committed = true
	}
	f.inFlight = false
	return nil
}

// TestMemberVerdict: what the directory records of a membership change is
// what the Raft group has, also when the change's request timed out and
// the change commits after (issue 23, finding 10); when that is not
// known yet, nothing is recorded and the change stays pending.
func TestMemberVerdict(t *testing.T) {
	timeout := api.Errorf(api.CodeUnavailable, "timeout")
	voters := func(ids ...uint64) cell.Members {
		m := cell.Members{Voters: map[uint64]string{}, Learners: map[uint64]string{}}
		for _, id := range ids {
			m.Voters[id] = "raft"
		}
		return m
	}
	add := api.MemberRequest{Cell: "demo", Action: api.MemberAdd, Lockd: 6}
	remove := api.MemberRequest{Cell: "demo", Action: api.MemberRemove, Lockd: 5}
	for _, tc := range []struct {
		name    string
		req     api.MemberRequest
		id      uint64
		change  error
		group   fakeGroup
		want    string // "" : nothing recorded, an error
		pending bool
	}{
		{name: "made", req: add, id: 6, group: fakeGroup{before: voters(1, 2, 3), after: voters(1, 2, 3, 6), committed: true}, want: api.MemberDone},
		{name: "timed out after the commit", req: add, id: 6, change: timeout,
			group: fakeGroup{before: voters(1, 2, 3), after: voters(1, 2, 3, 6), committed: true}, want: api.MemberDone},
		{name: "timed out, commits later", req: add, id: 6, change: timeout,
			group: fakeGroup{before: voters(1, 2, 3), after: voters(1, 2, 3, 6), inFlight: true, lands: true}, want: api.MemberDone},
		{name: "removal timed out, commits later", req: remove, id: 5, change: timeout,
			group: fakeGroup{before: voters(1, 2, 3, 4, 5), after: voters(1, 2, 3, 4), inFlight: true, lands: true}, want: api.MemberDone},
		{name: "timed out, lost with its leader", req: add, id: 6, change: timeout,
			group: fakeGroup{before: voters(1, 2, 3), after: voters(1, 2, 3, 6), inFlight: true}, want: api.MemberAbort},
		{name: "rejected", req: add, id: 6, change: api.Errorf(api.CodeUnavailable, "rejected"),
			group: fakeGroup{before: voters(1, 2, 3), after: voters(1, 2, 3, 6)}, want: api.MemberAbort},
		{name: "timed out, no barrier commits", req: add, id: 6, change: timeout,
			group: fakeGroup{before: voters(1, 2, 3), after: voters(1, 2, 3, 6), inFlight: true, lands: true, barrierErr: timeout}, pending: true},
		{name: "timed out, membership unreadable", req: add, id: 6, change: timeout,
			group: fakeGroup{before: voters(1, 2, 3), after: voters(1, 2, 3, 6), inFlight: true, lands: true, readErr: timeout}, pending: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.group
			got, err := memberVerdict(&g, tc.req, tc.id, tc.change)
			if tc.pending {
				if err == nil || got != "" {
					t.Fatalf("verdict %q, err %v: want nothing recorded (pending) while the outcome is unknown", got, err)
				}
				if !errors.Is(err, api.ErrUnavailable) && api.CodeOf(err) != api.CodeUnavailable {
					t.Fatalf("err %v: want unavailable", err)
				}
				return
			}
			g.later()
			if err != nil || got != tc.want {
				t.Fatalf("the directory records %q (err %v), want %q; the group's membership ends with the change: %v", got, err, tc.want, g.committed)
			}
			if wantMade := got == api.MemberDone; g.committed != wantMade {
				t.Fatalf("the directory records %s, but the group's membership ends with the change: %v", got, g.committed)
			}
		})
	}
}
