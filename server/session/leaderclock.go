package session

import (
	"sync"
	"time"
)

// LeaderClock is one replica's record, on its own monotonic clock, of when it
// applied the most recent leader_start. Every replica keeps one (it is soft
// state beside the state machine, lost on restart). When the replica becomes
// leader, its leader_start carries how long the previous leadership lasted as
// this replica saw it: from its apply of that leadership's leader_start to
// the new proposal, which covers the whole leadership and the election gap
// after it. The state machine charges that to every session that did not
// renew under the leadership (fsm leaderStart), so that fail-overs of any
// length, even shorter than a leader_tick, bound how long a dead session
// lives.
//
// It is a lower bound on the time since any KeepAlive acknowledged before
// the previous leadership began: the apply follows that leader_start's
// commit, the proposal precedes the next one's commit, and such an
// acknowledgement required a ReadIndex under an older epoch, which cannot
// complete once the previous leader_start has committed.
type LeaderClock struct {
	now func() time.Time

	mu    sync.Mutex
	known bool
	epoch uint64    // leader epoch begun by the last leader_start applied here
	at    time.Time // when it applied
	// The last hand_over applied here (server/fsm handover.go): its
	// leader epoch, its index and when it applied (hoIndex 0: none).
	hoEpoch, hoIndex uint64
	hoAt             time.Time
}

// leaderClockDrift scales measurements down by 2 % so that a replica whose
// clock runs fast still reports a lower bound.
const leaderClockDrift = 50

// NewLeaderClock returns a clock that has seen no leader_start; now is
// time.Now if nil.
func NewLeaderClock(now func() time.Time) *LeaderClock {
	if now == nil {
		now = time.Now
	}
	return &LeaderClock{now: now}
}

// Applied records that the leader_start beginning leader epoch epoch has just
// applied on this replica. A repeat for the same epoch keeps the first time.
func (c *LeaderClock) Applied(epoch uint64) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known && c.epoch == epoch {
		return
	}
	c.known, c.epoch, c.at = true, epoch, now
}

// Prev returns the leader epoch this replica last saw begin and how long ago,
// in milliseconds, less the drift margin; (0, 0) if it saw none since it
// started (restart, or caught up by snapshot): the state machine then
// charges the leadership's committed ticks only.
func (c *LeaderClock) Prev() (epoch uint64, ms int64) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return 0, 0
	}
	d := now.Sub(c.at)
	if d <= 0 {
		return c.epoch, 0
	}
	return c.epoch, (d - d/leaderClockDrift).Milliseconds()
}

// HandedOver records that the hand_over at index, under leader epoch
// epoch, has just applied on this replica.
func (c *LeaderClock) HandedOver(epoch, index uint64) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hoEpoch, c.hoIndex, c.hoAt = epoch, index, now
}

// SinceHandOver returns the index of the last hand_over this replica
// applied under leader epoch epoch and how long ago, in milliseconds,
// less the drift margin: a lower bound on the time since the leader that
// committed it measured its silences. (0, 0) if it applied none under
// epoch since it started: the next leader_start then charges the
// silences alone.
func (c *LeaderClock) SinceHandOver(epoch uint64) (index uint64, ms int64) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hoIndex == 0 || c.hoEpoch != epoch {
		return 0, 0
	}
	d := now.Sub(c.hoAt)
	if d <= 0 {
		return c.hoIndex, 0
	}
	return c.hoIndex, (d - d/leaderClockDrift).Milliseconds()
}
