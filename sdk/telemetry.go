package sdk

// Lease telemetry: per session, what an operator watching a client wants
// to know about its lease: when the cell last confirmed it, how much of
// the local lease is left, how often and how long it was in jeopardy,
// how many fail-overs it saw, and its KeepAlives sent and failed.

import (
	"context"
	"errors"
	"sort"
	"sync/atomic"
	"time"
)

// SessionStats are a session's lease figures (Session.Stats).
type SessionStats struct {
	Cell    string
	Session uint64
	Epoch   uint64 // the cell's leader epoch last seen
	Proxy   string // the lockproxy its KeepAlives go through ("" direct)
	Lease   time.Duration
	// LastConfirmed is when the reply to the last confirmed KeepAlive
	// arrived (zero: none since the open); LastConfirmedSend is that
	// KeepAlive's send time, which the local lease clock counts from.
	LastConfirmed     time.Time
	LastConfirmedSend time.Time
	// LeaseMargin is how long the local lease clock (LocalExpiry, the
	// conservative one) still holds the lease: 0 once it ran out.
	LeaseMargin time.Duration
	InJeopardy  bool
	// JeopardyEpisodes counts the times the local lease ran out;
	// JeopardyTime is their total length, the current one included.
	JeopardyEpisodes uint64
	JeopardyTime     time.Duration
	// Failovers counts the leader changes the session observed (a new
	// epoch in a KeepAlive reply).
	Failovers uint64
	// KeepAlivesSent counts KeepAlive requests sent (every attempt);
	// KeepAlivesFailed those that got no confirmation (an attempt retried,
	// or a round that failed).
	KeepAlivesSent, KeepAlivesFailed uint64
	// Ended is true once the session has ended (expired or closed).
	Ended bool
}

// telemetry are a session's counters: the KeepAlive counts atomic (the
// loops add to them), the rest under Session.mu.
type telemetry struct {
	sent, failed atomic.Uint64
	confirmedAt  time.Time     // mu: when the last confirmation arrived
	jeopardies   uint64        // mu: episodes begun
	jeopardyDone time.Duration // mu: length of the episodes ended
}

// countSends makes cl count each attempt as it is sent.
func (t *telemetry) countSends(cl *call) *call {
	before := cl.before
	cl.before = func() {
		t.sent.Add(1)
		if before != nil {
			before()
		}
	}
	return cl
}

// noteRound counts one KeepAlive round's failures: attempts requests (sent
// and counted by countSends), of which the last confirmed the lease
// unless err.
func (t *telemetry) noteRound(attempts int, err error) {
	if attempts <= 0 {
		return
	}
	failed := uint64(attempts - 1)
	if err != nil && !errors.Is(err, context.Canceled) {
		failed++
	}
	t.failed.Add(failed)
}

// jeopardyEnded adds an episode's length once the session is safe again.
func (t *telemetry) jeopardyEnded(d time.Duration) { t.jeopardyDone += max(d, 0) }

// statsSnapshot is what Stats reads under the session's lock.
type statsSnapshot struct {
	stats         SessionStats
	localExpiry   time.Time
	jeopardySince time.Time
	jeopardyDone  time.Duration
}

// statsAt are the figures of snap at now: pure, so tested without waiting.
func statsAt(snap statsSnapshot, now time.Time) SessionStats {
	st := snap.stats
	st.LeaseMargin = max(snap.localExpiry.Sub(now), 0)
	st.JeopardyTime = snap.jeopardyDone
	if !snap.jeopardySince.IsZero() && !st.Ended {
		st.JeopardyTime += max(now.Sub(snap.jeopardySince), 0)
	}
	st.InJeopardy = !st.Ended && (!snap.jeopardySince.IsZero() || st.LeaseMargin == 0)
	return st
}

// Stats reports the session's lease figures now.
func (s *Session) Stats() SessionStats {
	s.mu.Lock()
	snap := statsSnapshot{
		stats: SessionStats{Cell: s.cs.name, Session: s.id, Epoch: s.epoch, Proxy: s.proxy, Lease: s.lease,
			LastConfirmed: s.tel.confirmedAt, LastConfirmedSend: s.lastConfirmedSend,
			JeopardyEpisodes: s.tel.jeopardies, Failovers: s.gen, Ended: s.err != nil},
		localExpiry:   s.localExpiryLocked(),
		jeopardySince: s.jeopardySince,
		jeopardyDone:  s.tel.jeopardyDone,
	}
	s.mu.Unlock()
	snap.stats.KeepAlivesSent, snap.stats.KeepAlivesFailed = s.tel.sent.Load(), s.tel.failed.Load()
	return statsAt(snap, time.Now())
}

// SessionStats reports the lease figures of the client's current
// sessions (one per cell it holds one on), by cell name.
func (c *Client) SessionStats() []SessionStats {
	var out []SessionStats
	for _, s := range c.currentSessions() {
		out = append(out, s.Stats())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cell < out[j].Cell })
	return out
}

// currentSessions are the sessions the client's slots hold now.
func (c *Client) currentSessions() []*Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Session, 0, len(c.slots))
	for _, sl := range c.slots {
		sl.mu.Lock()
		if sl.cur != nil {
			out = append(out, sl.cur)
		}
		sl.mu.Unlock()
	}
	return out
}
