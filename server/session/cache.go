package session

// The leader's side of client caching: a client may serve a node from its
// cache until the leader invalidates it, and the leader may not commit a
// change to a cached node until every cacher has acknowledged the
// invalidation, its lease has run out, or the invalidation's deadline has
// passed (Invalidation: one cache window after the renewal before it; a
// cacher that renews but never acknowledges delays a write by at most
// that, and is then refused as a cacher). A new leader knows no cachers,
// so it first waits until every client has seen its epoch (and flushed
// its cache) or has stopped trusting its cache (api.CacheWindow after its
// last KeepAlive confirmed by the old leader, which preceded this start).

import (
	"context"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// Has reports whether the session holds a lease under this leadership.
func (m *Manager) Has(id uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.leases[id]
	return ok && m.active
}

// Caches reports whether the session holds a lease under this leadership
// and caches reads (cache_session applied).
func (m *Manager) Caches(id uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	return ok && m.active && l.caches
}

// WindowWithin reports whether a client that serves cached values for
// window after its last confirmed KeepAlive stays within the session's
// cache window, which invalidation deadlines and a new leader's fence
// count on (api.CacheWindowFor its lease). Zero (not declared): no.
func (m *Manager) WindowWithin(id uint64, window time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	return ok && window > 0 && window <= api.CacheWindowFor(l.dur)
}

// MarkCaches records that the session caches reads (its cache_session
// applied). It has seen this leadership: it cached nothing before.
func (m *Manager) MarkCaches(id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[id]; ok {
		l.caches = true
	}
}

// Invalidation is an invalidation queued for a session: its seq, the
// path, and its deadline: the leader's time of the session's last renewal
// before it was queued, plus the session's cache window
// (api.CacheWindowFor). The client counts its window from the send of a
// KeepAlive, which precedes the renewal, less a drift margin; every
// KeepAlive reply built after the invalidation was queued carries it
// (only an ack removes an event), and the client drops the path before
// it extends its window from that reply. So past the deadline the client
// serves the path from its cache no more, acknowledged or not. Later
// KeepAlives do not move it. A zero Deadline is none (WaitAcked then
// waits for the ack or the lease, as before deadlines existed).
type Invalidation struct {
	Seq      uint64
	Path     string
	Deadline time.Time
	// Fair: the deadline left the client at least half its cache window
	// after the invalidation was queued (FairAckTime). Only a fair
	// deadline passed unacknowledged is held against the session (Missed,
	// then refused as a cacher); an unfair one ends the wait the same way
	// (Lapsed), for an honest client may not have had time to answer.
	Fair bool
}

// FairAckTime is the share of its cache window a client is given, at
// least, to acknowledge an invalidation before a passed deadline counts
// against it: half. A session that never acknowledges delays a write
// by at most this without being refused (its deadline ends the wait
// either way), and is refused at its first fair deadline.
func FairAckTime(window time.Duration) time.Duration { return api.FairCacheAck(window) }

// pendingInval is an unacknowledged invalidation on the lease.
type pendingInval struct {
	seq  uint64
	path string
	due  time.Time
	fair bool
}

// WaitResult says how a wait for an acknowledgement ended.
type WaitResult int

const (
	// Acked: the client acknowledged, or the session ended.
	Acked WaitResult = iota
	// LeaseOut: the session's lease ran out unacknowledged.
	LeaseOut
	// Missed: the invalidation's deadline passed unacknowledged while the
	// lease was live. The client cannot serve the path any more, but it
	// did not answer: the caller refuses it as a cacher (Revoke).
	Missed
	// Lapsed: the deadline passed unacknowledged, but it was not fair
	// (Invalidation.Fair): the client cannot serve the path any more, and
	// is not held to have failed.
	Lapsed
)

// Invalidate queues an invalidation of path for the session's cache;
// false if the session has no lease here (nothing of its cache can be
// trusted then: its client is in jeopardy).
func (m *Manager) Invalidate(id uint64, path string) (Invalidation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	if !ok || !m.active {
		return Invalidation{}, false
	}
	seq := m.queueLocked(id, l, api.Event{Type: api.EventInvalidate, Path: path})
	w := api.CacheWindowFor(l.dur)
	due := l.renewedAt.Add(w)
	inv := Invalidation{Seq: seq, Path: path, Deadline: due, Fair: due.Sub(m.cfg.Now()) >= FairAckTime(w)}
	if len(l.invals) >= api.MaxPendingEvents {
		// The oldest deadline goes: a later one is the safe side.
		l.invals = l.invals[:copy(l.invals, l.invals[1:])]
	}
	l.invals = append(l.invals, pendingInval{seq: seq, path: path, due: inv.Deadline, fair: inv.Fair})
	return inv, true
}

// Outstanding reports whether the session has an invalidation it has not
// acknowledged. Such a session may not record a new cacheable read: then
// the first unacknowledged invalidation of a path bounds every later one
// of it (dueLocked), since a client that dropped the path could not have
// cached it again before acknowledging.
func (m *Manager) Outstanding(id uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	return ok && len(l.invals) > 0
}

// Flushing records that the session was refused as a cacher and sent an
// invalidation of every path it may hold, the last being inv: once it
// acknowledges inv, it holds nothing (and may cache nothing new).
func (m *Manager) Flushing(id uint64, inv Invalidation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[id]; ok && inv.Seq > l.flushSeq {
		l.flushSeq = inv.Seq
	}
}

// WaitAcked waits until the session's client has acknowledged inv, the
// session ended, its lease ran out, or inv's deadline passed (the
// earliest deadline of an unacknowledged invalidation of the same path
// up to it: a write retried after its first attempt gave up waits no
// longer than the first): after any of these its cache cannot serve what
// inv invalidated. It fails if leadership is lost or ctx ends first (the
// write that waits must then not commit).
func (m *Manager) WaitAcked(ctx context.Context, id uint64, inv Invalidation) (WaitResult, error) {
	for {
		m.mu.Lock()
		if !m.active {
			m.mu.Unlock()
			return Acked, api.Errorf(api.CodeNotLeader, "leadership lost while invalidating caches")
		}
		l, ok := m.leases[id]
		if !ok || l.acked >= inv.Seq || (l.flushSeq > 0 && l.acked >= l.flushSeq) {
			m.mu.Unlock()
			return Acked, nil
		}
		now := m.cfg.Now()
		until, res := l.expiry, LeaseOut
		if due, fair := l.dueLocked(inv); !due.IsZero() && due.Before(until) {
			until, res = due, Missed
			if !fair && !mutant.On(mutant.FairDeadline) {
				res = Lapsed
			}
		}
		if !now.Before(until) {
			m.mu.Unlock()
			if res == Missed {
				m.missed.Add(1)
			}
			return res, nil // the client no longer serves it from its cache
		}
		if l.ackWake == nil {
			l.ackWake = make(chan struct{})
		}
		wake, stopped := l.ackWake, m.stopped
		m.mu.Unlock()
		if !sleepUntil(ctx, until.Sub(now), wake, stopped) {
			return Acked, api.Errorf(api.CodeUnavailable, "session %d did not acknowledge a cache invalidation in time: %v", id, ctx.Err())
		}
	}
}

// dueLocked is inv's effective deadline: the earliest of its own and
// those of the session's unacknowledged invalidations of the same path
// queued before it, and whether that one was fair. Zero (none) if inv has
// none.
func (l *lease) dueLocked(inv Invalidation) (time.Time, bool) {
	due, fair := inv.Deadline, inv.Fair
	if due.IsZero() {
		return due, fair
	}
	for _, p := range l.invals {
		if p.seq > inv.Seq {
			break
		}
		if p.path == inv.Path && p.due.Before(due) {
			due, fair = p.due, p.fair
		}
	}
	return due, fair
}

// Missed counts waits that ended at an invalidation's deadline.
func (m *Manager) Missed() uint64 { return m.missed.Load() }

// sleepUntil waits for d, a wake-up or the end of the leadership; false if
// ctx ended first.
func sleepUntil(ctx context.Context, d time.Duration, wake, stopped <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	case <-stopped:
	case <-ctx.Done():
		return false
	}
	return true
}

// ackedLocked records an ack up to seq and wakes WaitAcked.
func (m *Manager) ackedLocked(l *lease, seq uint64) {
	if seq > l.acked {
		l.acked = seq
	}
	if l.ackWake != nil {
		close(l.ackWake)
		l.ackWake = nil
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
