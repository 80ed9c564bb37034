package fsm

import (
	"bytes"
	"testing"

	"github.com/lockservice/lockd/api"
)

func sessionInfo(t *testing.T, s *State, id uint64) SessionInfo {
	t.Helper()
	for _, info := range s.Sessions() {
		if info.ID == id {
			return info
		}
	}
	t.Fatalf("no session %d", id)
	return SessionInfo{}
}

// A session that does not renew under a leadership is charged its recorded
// length at the next leader_start; one that renews (confirm) is not.
func TestLeaderStartChargesUnconfirmedSessions(t *testing.T) {
	h := newDemo(t)
	live, dead := h.open(), h.open()
	epoch := h.s.Epoch()
	if got := sessionInfo(t, h.s, live).ConfirmedEpoch; got != epoch {
		t.Fatalf("new session confirmed epoch %d, want %d", got, epoch)
	}

	// Leadership 1 ends after 3 s; both were opened under it: nothing charged.
	h.ok(Command{Op: OpLeaderTick, Epoch: epoch, ElapsedMS: 3000})
	h.leaderStart()
	if got := sessionInfo(t, h.s, dead).SilentMS; got != 0 {
		t.Fatalf("session confirmed in the ending leadership charged %d ms", got)
	}

	// Leadership 2: only live renews; ticks only grow; it ends after 2.5 s.
	epoch = h.s.Epoch()
	h.ok(Command{Op: OpConfirm, Epoch: epoch, Sessions: []uint64{live}})
	h.ok(Command{Op: OpLeaderTick, Epoch: epoch, ElapsedMS: 2500})
	h.ok(Command{Op: OpLeaderTick, Epoch: epoch, ElapsedMS: 1000})
	h.leaderStart()
	if got := sessionInfo(t, h.s, live).SilentMS; got != 0 {
		t.Fatalf("renewed session charged %d ms", got)
	}
	if got := sessionInfo(t, h.s, dead).SilentMS; got != 2500 {
		t.Fatalf("silent session charged %d ms, want 2500", got)
	}

	// Leadership 3: nobody renews; both are charged; then dead renews and is cleared.
	epoch = h.s.Epoch()
	h.ok(Command{Op: OpLeaderTick, Epoch: epoch, ElapsedMS: 4000})
	h.leaderStart()
	if a, b := sessionInfo(t, h.s, live).SilentMS, sessionInfo(t, h.s, dead).SilentMS; a != 4000 || b != 6500 {
		t.Fatalf("charges %d, %d; want 4000, 6500", a, b)
	}
	h.ok(Command{Op: OpConfirm, Epoch: h.s.Epoch(), Sessions: []uint64{dead}})
	if got := sessionInfo(t, h.s, dead).SilentMS; got != 0 {
		t.Fatalf("confirm left %d ms", got)
	}

	// The clock survives a snapshot.
	b := snapBytes(t, h.s)
	if !bytes.Equal(snapBytes(t, restore(t, b)), b) {
		t.Fatal("snapshot round trip changed the leader clock state")
	}
}

// Ticks and confirms from a deposed leader are refused and change nothing.
func TestLeaderClockEntriesAreEpochGuarded(t *testing.T) {
	h := newDemo(t)
	id := h.open()
	old := h.s.Epoch()
	h.leaderStart()
	before := snapNoIndex(t, h.s)
	h.fail(Command{Op: OpLeaderTick, Epoch: old, ElapsedMS: 60000}, api.CodeNotLeader)
	h.fail(Command{Op: OpConfirm, Epoch: old, Sessions: []uint64{id}}, api.CodeNotLeader)
	if !bytes.Equal(before, snapNoIndex(t, h.s)) {
		t.Fatal("a stale tick or confirm changed the state")
	}
}

// A leader_start proposal that timed out may still commit, so the leader's
// retry can apply a second copy for the same replica and term. The copy must
// change nothing: no epoch bump (the running manager would restart and drop
// its leases) and no charge. A leader_start from an older term is refused.
func TestDuplicateLeaderStartChangesNothing(t *testing.T) {
	h := newDemo(t)
	id := h.open()
	start := Command{Op: OpLeaderStart, ReplicaID: 2, Term: 7}
	epoch := h.ok(start).Epoch
	h.ok(Command{Op: OpLeaderTick, Epoch: epoch, ElapsedMS: 3000})
	before := snapNoIndex(t, h.s)

	if got := h.ok(start).Epoch; got != epoch {
		t.Fatalf("second leader_start for replica 2 term 7 answered epoch %d, want %d", got, epoch)
	}
	if h.s.Epoch() != epoch {
		t.Fatalf("second leader_start for the same replica and term moved the epoch to %d, want %d", h.s.Epoch(), epoch)
	}
	if !bytes.Equal(before, snapNoIndex(t, h.s)) {
		t.Fatal("second leader_start for the same replica and term changed the state")
	}
	for _, stale := range []Command{
		{Op: OpLeaderStart, ReplicaID: 2, Term: 6}, // older term
		{Op: OpLeaderStart, ReplicaID: 3, Term: 7}, // another replica, same term: not Raft
	} {
		h.fail(stale, api.CodeNotLeader)
		if !bytes.Equal(before, snapNoIndex(t, h.s)) {
			t.Fatalf("stale leader_start %+v changed the state", stale)
		}
	}
	if got := sessionInfo(t, h.s, id).SilentMS; got != 0 {
		t.Fatalf("session charged %d ms by leader_starts of the running leadership", got)
	}
}

// leader_start charges the larger of the ending leadership's ticks and the
// length its proposer measured, but only a measurement of that leadership
// (Epoch names it); the charge saturates at the lease.
func TestLeaderStartChargesReportedLeadership(t *testing.T) {
	cases := []struct {
		name       string
		ticks      int64
		epochDelta int64 // reported epoch minus the ending one
		prev       int64
		want       int64
	}{
		{"report longer than ticks", 1000, 0, 2500, 2500},
		{"no ticks (shorter than one)", 0, 0, 700, 700},
		{"ticks longer than report", 3000, 0, 2500, 3000},
		{"report of an older leadership", 1000, -1, 5000, 1000},
		{"report of no leadership", 1000, 1, 5000, 1000},
		{"report beyond the lease", 0, 0, 1 << 62, 12000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newDemo(t)
			id := h.ok(Command{Op: OpOpenSession, LeaseMS: 12000}).Session
			h.leaderStart()
			ending := h.s.Epoch()
			if tc.ticks > 0 {
				h.ok(Command{Op: OpLeaderTick, Epoch: ending, ElapsedMS: tc.ticks})
			}
			_, term := h.s.Leader()
			h.ok(Command{Op: OpLeaderStart, ReplicaID: 2, Term: term + 1, Epoch: uint64(int64(ending) + tc.epochDelta), PrevLeadershipMS: tc.prev})
			if got := sessionInfo(t, h.s, id).SilentMS; got != tc.want {
				t.Fatalf("charged %d ms, want %d", got, tc.want)
			}
		})
	}
}
