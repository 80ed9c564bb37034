package fsm

import (
	"bytes"
	"testing"

	"github.com/lockservice/lockd/api"
)

// A planned hand-over: the next leader_start charges each listed session
// the silence the hand_over recorded plus the time the proposer measured
// since it applied that hand_over, at most the lease; an unlisted session
// keeps its full lease, an unconfirmed one the larger charge, and a
// measurement of another hand_over (a cancelled one, an older one) is not
// charged.
func TestHandOverCharge(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cancel: an empty hand_over follows the record; again: a
		// second record follows it (the first one's index is measured).
		cancel, again bool
		// otherEpoch: the measure names another leadership; restored:
		// the leader_start is a restore's first.
		otherEpoch, restored bool
		measured             func(h *harness, first uint64) uint64 // the leader_start's HandOverIndex
		sinceMS              int64
		quiet, frozen        int64 // the sessions' silences after the leader_start
	}{
		{name: "measured", measured: func(h *harness, first uint64) uint64 { return first }, sinceMS: 300, quiet: 1300, frozen: 9300},
		{name: "unmeasured", measured: func(*harness, uint64) uint64 { return 0 }, sinceMS: 300, quiet: 1000, frozen: 9000},
		{name: "saturates at the lease", measured: func(h *harness, first uint64) uint64 { return first }, sinceMS: 5000, quiet: 6000, frozen: 12000},
		{name: "cancelled", cancel: true, measured: func(h *harness, first uint64) uint64 { return first }, sinceMS: 300},
		{name: "another hand_over's measure", again: true, measured: func(h *harness, first uint64) uint64 { return first }, sinceMS: 4000, quiet: 500, frozen: 500},
		{name: "another epoch's measure", otherEpoch: true, measured: func(h *harness, first uint64) uint64 { return first }, sinceMS: 4000, quiet: 1000, frozen: 9000},
		{name: "restored", restored: true, measured: func(h *harness, first uint64) uint64 { return first }, sinceMS: 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newDemo(t)
			quiet, frozen, fresh, gone := h.open(), h.open(), h.open(), h.open()
			h.ok(Command{Op: OpCloseSession, WriteHeader: api.WriteHeader{Session: gone}})
			epoch := h.s.Epoch()
			first := h.ok(Command{Op: OpHandOver, Epoch: epoch, Sessions: []uint64{frozen, quiet, gone}, SilentMS: []int64{9000, 1000, 5000}}).Index
			if got := h.s.HandOverIndex(); got != first {
				t.Fatalf("hand-over index %d, want %d", got, first)
			}
			if tc.cancel {
				h.ok(Command{Op: OpHandOver, Epoch: epoch})
			}
			if tc.again {
				h.ok(Command{Op: OpHandOver, Epoch: epoch, Sessions: []uint64{frozen, quiet}, SilentMS: []int64{500, 500}})
			}
			start := Command{Op: OpLeaderStart, ReplicaID: 2, Term: h.idx + 1, Epoch: epoch, HandOverIndex: tc.measured(h, first), HandOverMS: tc.sinceMS}
			if tc.otherEpoch {
				start.Epoch = epoch - 1
			}
			if tc.restored {
				start.Restored = &RestoreStart{Floor: epoch + 10, Prefixes: []string{"/demo"}}
			}
			h.ok(start)
			for _, c := range []struct {
				id   uint64
				want int64
			}{{quiet, tc.quiet}, {frozen, tc.frozen}, {fresh, 0}} {
				if got := sessionInfo(t, h.s, c.id).SilentMS; got != c.want {
					t.Errorf("session %d silent %d ms, want %d", c.id, got, c.want)
				}
			}
			if got := h.s.HandOverIndex(); got != 0 {
				t.Errorf("hand-over index %d after the leader_start, want 0", got)
			}
		})
	}
}

// The charge is the larger of the hand-over's and the leadership's for a
// session that never renewed under the leadership; a hand_over of an
// older leadership is refused, and one that does not parse changes
// nothing.
func TestHandOverRefusals(t *testing.T) {
	h := newDemo(t)
	s := h.open()
	h.leaderStart() // s is now unconfirmed under the new leadership
	epoch := h.s.Epoch()
	h.fail(Command{Op: OpHandOver, Epoch: epoch - 1, Sessions: []uint64{s}, SilentMS: []int64{100}}, api.CodeNotLeader)
	h.fail(Command{Op: OpHandOver, Epoch: epoch, Sessions: []uint64{s}}, api.CodeBadRequest)
	many := make([]uint64, MaxHandOverSessions+1)
	h.fail(Command{Op: OpHandOver, Epoch: epoch, Sessions: many, SilentMS: make([]int64, len(many))}, api.CodeBadRequest)
	h.ok(Command{Op: OpLeaderTick, Epoch: epoch, ElapsedMS: 4000})
	h.ok(Command{Op: OpHandOver, Epoch: epoch, Sessions: []uint64{s}, SilentMS: []int64{-5}})
	h.ok(Command{Op: OpLeaderStart, ReplicaID: 2, Term: h.idx + 1, Epoch: epoch, HandOverIndex: h.idx, HandOverMS: 200})
	if got := sessionInfo(t, h.s, s).SilentMS; got != 4000 {
		t.Fatalf("unconfirmed session silent %d ms, want the leadership's 4000", got)
	}
}

// A hand-over's record is part of the state: a snapshot carries it, and a
// replica restored from one charges as the others do.
func TestHandOverSnapshot(t *testing.T) {
	h := newDemo(t)
	a, b := h.open(), h.open()
	epoch := h.s.Epoch()
	at := h.ok(Command{Op: OpHandOver, Epoch: epoch, Sessions: []uint64{b, a}, SilentMS: []int64{700, 2500}}).Index
	snap := h.snap()
	r := harnessOn(t, restore(t, snap))
	if !bytes.Equal(snapBytes(t, r.s), snap) {
		t.Fatalf("restored state's snapshot differs")
	}
	if got := r.s.HandOverIndex(); got != at {
		t.Fatalf("restored hand-over index %d, want %d", got, at)
	}
	start := Command{Op: OpLeaderStart, ReplicaID: 2, Term: 9, Epoch: epoch, HandOverIndex: at, HandOverMS: 100}
	h.ok(start)
	r.ok(start)
	for _, id := range []uint64{a, b} {
		if x, y := sessionInfo(t, h.s, id).SilentMS, sessionInfo(t, r.s, id).SilentMS; x != y || x == 0 {
			t.Fatalf("session %d silent %d ms, restored %d", id, x, y)
		}
	}
	if !bytes.Equal(snapBytes(t, r.s), snapBytes(t, h.s)) {
		t.Fatalf("restored replica diverged after the leader_start")
	}
}
