package fake

// The leader's soft state about sessions, faked: each live session's
// lease length and the events queued for it, numbered and re-sent until
// a KeepAlive acknowledges them (server/session's rules, without its
// lease timers: the fake never expires a session by itself).

import (
	"slices"
	"time"

	"github.com/lockservice/lockd/api"
)

// session is the leader's soft state about one live session.
type session struct {
	leaseMS int64
	pending []api.Event
}

// sink delivers the watch table's events into the sessions' queues. The
// table fires only under the Cell's lock, so the sink takes none.
type sink struct{ c *Cell }

// Deliver queues ev for session id, if it lives.
func (k sink) Deliver(id uint64, ev api.Event) { k.c.queueLocked(id, ev) }

// queueLocked queues ev for session id (numbering it) and wakes the
// long-polls.
func (c *Cell) queueLocked(id uint64, ev api.Event) {
	s := c.sessions[id]
	if s == nil {
		return
	}
	if ev.Seq == 0 {
		c.evSeq++
		ev.Seq = c.evSeq
	}
	s.pending = append(s.pending, ev)
	c.broadcastLocked()
}

// broadcastLocked wakes every long-poll.
func (c *Cell) broadcastLocked() {
	close(c.wake)
	c.wake = make(chan struct{})
}

// Queue appends ev to session id's pending events and wakes its KeepAlive.
func (c *Cell) Queue(id uint64, ev api.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queueLocked(id, ev)
}

// Armed reports whether session id has the watch key armed.
func (c *Cell) Armed(id uint64, key WatchKey) bool {
	return slices.Contains(c.Watches(id), key)
}

// Watches lists the watches armed for session id.
func (c *Cell) Watches(id uint64) []WatchKey {
	var out []WatchKey
	for _, w := range c.watches.Watching(id) {
		out = append(out, WatchKey{Path: w.Path, Kind: w.Kind})
	}
	return out
}

// keepAliveLocked answers a KeepAlive: the session's secret, then whether
// the state knows it live; then its events (dropping those acknowledged
// under this leader epoch) at once, or after a long poll of at most
// WaitMS (capped at MaxKeepAliveWait) for one to arrive.
func (c *Cell) keepAliveLocked(rep int, req api.KeepAliveRequest) (int, any) {
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxKeepAliveWait)
	deadline := time.Now().Add(wait)
	for {
		if rep != c.leader {
			return c.notLeaderLocked()
		}
		if err := c.st.CheckSecret(req.Session, req.Secret); err != nil {
			return refuse(err)
		}
		if err := c.st.SessionExists(req.Session); err != nil {
			return refuse(err)
		}
		s := c.sessions[req.Session]
		if s == nil {
			return Fail(api.CodeUnavailable, "session %d not yet known to the leader", req.Session)
		}
		if req.AckEpoch == c.st.Epoch() {
			s.pending = slices.DeleteFunc(s.pending, func(ev api.Event) bool { return ev.Seq <= req.AckSeq })
		}
		if len(s.pending) > 0 || !time.Now().Before(deadline) {
			return 200, api.SessionResponse{Session: req.Session, LeaseMS: s.leaseMS, Epoch: c.st.Epoch(), Index: c.st.Index(), Events: slices.Clone(s.pending)}
		}
		if !c.sleepLocked(deadline) {
			return Fail(api.CodeUnavailable, "shutting down")
		}
	}
}

// sleepLocked waits, with the lock released, until a change, the deadline
// or Close; false if the cell closed.
func (c *Cell) sleepLocked(deadline time.Time) bool {
	wake := c.wake
	c.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	select {
	case <-wake:
	case <-t.C:
	case <-c.closed:
	}
	t.Stop()
	c.mu.Lock()
	select {
	case <-c.closed:
		return false
	default:
		return true
	}
}
