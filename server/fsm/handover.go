package fsm

import (
	"slices"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// A planned leadership hand-over (leader balancing, an operator's
// transfer, a clean stop) passes each session's silence on.
//
// A new leader gives every session confirmed under the last leadership a
// full lease from its own start (leaderStart): after an unplanned
// fail-over nobody knows when a session last renewed. Before a planned
// one the leader does: it stops renewing leases, commits hand_over with
// how long each session has been silent (the time since the renewal its
// lease counts from), and only then asks Raft to move the leadership. The
// next leader_start charges each listed session that silence plus the
// time since the hand_over applied on the proposer (HandOverMS, measured
// on its monotonic clock, less 2 %): a session whose client froze before
// the hand-over expires about a lease after its last renewal, as it would
// have without the hand-over, not a hand-over plus a lease after it.
//
// Safe because no client holds a lease the charge cuts short: a client
// counts its lease from a send before the renewal's arrival, no renewal
// is acknowledged once the silences are measured (the leader stops
// renewing first), the hand_over applies on the proposer after they were
// measured, and the charge is a lower bound on the time since. A session
// not listed keeps the full lease (the safe side), and a hand-over that
// did not happen is cancelled by an empty hand_over before the leader
// renews again.

// MaxHandOverSessions bounds one hand_over's sessions: the leader lists
// the most silent ones first; the others keep a full lease.
const MaxHandOverSessions = 4096

// OpHandOver records, under the running leadership (Epoch), each listed
// session's silence (Sessions, SilentMS) before a planned hand-over; an
// empty one cancels the last (the hand-over did not happen). Codec V4.
const OpHandOver Op = "hand_over"

// handOver is the silences the last hand_over of leader epoch epoch,
// applied at index, recorded, by session.
type handOver struct {
	epoch, index uint64
	silent       map[uint64]int64
}

// handOver records the silences of a planned hand-over (an empty one
// cancels it). Sessions the state does not know are skipped; a silence is
// clamped to the session's lease.
func (s *State) handOver(index uint64, c *Command) Result {
	if c.Epoch != s.epoch {
		return Result{Err: api.Errorf(api.CodeNotLeader, "hand_over from leader epoch %d, now %d", c.Epoch, s.epoch)}
	}
	if len(c.Sessions) != len(c.SilentMS) || len(c.Sessions) > MaxHandOverSessions {
		return Result{Err: api.Errorf(api.CodeBadRequest, "hand_over: %d sessions, %d silences (at most %d)", len(c.Sessions), len(c.SilentMS), MaxHandOverSessions)}
	}
	h := handOver{epoch: s.epoch, index: index}
	for i, id := range c.Sessions {
		sess, ok := s.sessions[id]
		if !ok {
			continue
		}
		if h.silent == nil {
			h.silent = make(map[uint64]int64, len(c.Sessions))
		}
		h.silent[id] = min(max(c.SilentMS[i], 0), sess.leaseMS)
	}
	s.handover = h
	return Result{Epoch: s.epoch}
}

// chargeHandOver is leaderStart's part for a hand-over of the ending
// leadership: each listed session's silence is at least its recorded one
// plus what the proposer measured since (only if it measured this
// hand_over: c.Epoch and c.HandOverIndex name it), at most its lease. It
// runs before the epoch moves on and clears the record. The first
// leader_start after a restore charges nothing of it (a backup's record
// says nothing of the time since: a full lease is the safe side).
func (s *State) chargeHandOver(c *Command) {
	h := s.handover
	s.handover = handOver{}
	if h.epoch != s.epoch || len(h.silent) == 0 || c.Restored != nil {
		return
	}
	var since int64
	if (c.Epoch == h.epoch && c.HandOverIndex == h.index) || (mutant.On(mutant.HandOverStaleCharge) && c.HandOverIndex != 0) {
		since = max(c.HandOverMS, 0)
	}
	for id, ms := range h.silent { // each session on its own: order does not matter
		if sess, ok := s.sessions[id]; ok {
			sess.silentMS = max(sess.silentMS, min(ms+min(since, sess.leaseMS), sess.leaseMS))
		}
	}
}

// HandOverIndex is the index of the running leadership's last hand_over
// (0: none, or it was cancelled, or a leader_start came since).
func (s *State) HandOverIndex() uint64 {
	if s.handover.epoch != s.epoch {
		return 0
	}
	return s.handover.index
}

// snapHandOver is a hand-over's record in a snapshot's header, sessions
// in id order.
type snapHandOver struct {
	Epoch    uint64   `json:"epoch"`
	Index    uint64   `json:"index"`
	Sessions []uint64 `json:"sessions,omitempty"`
	SilentMS []int64  `json:"silent_ms,omitempty"`
}

// snapHandOver is the record for a snapshot (nil without one).
func (h handOver) snap() *snapHandOver {
	if h.index == 0 {
		return nil
	}
	out := &snapHandOver{Epoch: h.epoch, Index: h.index}
	for id := range h.silent {
		out.Sessions = append(out.Sessions, id)
	}
	slices.Sort(out.Sessions)
	for _, id := range out.Sessions {
		out.SilentMS = append(out.SilentMS, h.silent[id])
	}
	return out
}

// restoreHandOver sets the record a snapshot's header carries.
func restoreHandOver(sh *snapHandOver) (handOver, bool) {
	if sh == nil {
		return handOver{}, true
	}
	if len(sh.Sessions) != len(sh.SilentMS) || len(sh.Sessions) > MaxHandOverSessions {
		return handOver{}, false
	}
	h := handOver{epoch: sh.Epoch, index: sh.Index}
	for i, id := range sh.Sessions {
		if h.silent == nil {
			h.silent = make(map[uint64]int64, len(sh.Sessions))
		}
		h.silent[id] = sh.SilentMS[i]
	}
	return h, true
}
