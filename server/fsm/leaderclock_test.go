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
