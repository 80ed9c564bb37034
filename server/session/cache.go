package session

// The leader's side of client caching: a client may serve a node from its
// cache until the leader invalidates it, and the leader may not commit a
// change to a cached node until every cacher has acknowledged the
// invalidation or its lease has run out. A new leader knows no cachers,
// so it first waits until every client has seen its epoch (and flushed
// its cache) or has stopped trusting its cache (api.CacheWindow after its
// last KeepAlive confirmed by the old leader, which preceded this start).

import (
	"context"
	"time"

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

// MarkCaches records that the session caches reads (its cache_session
// applied). It has seen this leadership: it cached nothing before.
func (m *Manager) MarkCaches(id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[id]; ok {
		l.caches = true
	}
}

// Invalidate queues an invalidation of path for the session's cache and
// returns its seq; false if the session has no lease here (nothing of
// its cache can be trusted then: its client is in jeopardy).
func (m *Manager) Invalidate(id uint64, path string) (uint64, bool) {
	return m.queue(id, api.Event{Type: api.EventInvalidate, Path: path})
}

// WaitAcked waits until the session's client has acknowledged the event
// seq, its lease has run out, or the session ended: after that its cache
// cannot serve what seq invalidated. It fails if leadership is lost or
// ctx ends first (the write that waits must then not commit).
func (m *Manager) WaitAcked(ctx context.Context, id, seq uint64) error {
	for {
		m.mu.Lock()
		if !m.active {
			m.mu.Unlock()
			return api.Errorf(api.CodeNotLeader, "leadership lost while invalidating caches")
		}
		l, ok := m.leases[id]
		if !ok || l.acked >= seq {
			m.mu.Unlock()
			return nil
		}
		left := l.expiry.Sub(m.cfg.Now())
		if left <= 0 {
			m.mu.Unlock()
			return nil // its lease ran out: the client no longer trusts its cache
		}
		if l.ackWake == nil {
			l.ackWake = make(chan struct{})
		}
		wake, stopped := l.ackWake, m.stopped
		m.mu.Unlock()
		if !sleepUntil(ctx, left, wake, stopped) {
			return api.Errorf(api.CodeUnavailable, "session %d did not acknowledge a cache invalidation in time: %v", id, ctx.Err())
		}
	}
}

// WaitFenced waits until no client can serve from a cache filled under an
// earlier leader: every session has acknowledged this leadership's epoch,
// or the cache window has passed since it started. It fails if leadership
// is lost or ctx ends first.
func (m *Manager) WaitFenced(ctx context.Context) error {
	for {
		m.mu.Lock()
		if !m.active {
			m.mu.Unlock()
			return api.Errorf(api.CodeNotLeader, "leadership lost")
		}
		if !m.fenced && !m.cfg.Now().Before(m.fenceBy) {
			m.fenced = true
		}
		if m.fenced {
			m.mu.Unlock()
			return nil
		}
		left := m.fenceBy.Sub(m.cfg.Now())
		wake, stopped := m.fenceWake, m.stopped
		m.mu.Unlock()
		if !sleepUntil(ctx, left, wake, stopped) {
			return api.Errorf(api.CodeUnavailable, "waiting for clients to learn of the new leader: %v", ctx.Err())
		}
	}
}

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

// sawEpochLocked records that l's client has seen this leadership's
// epoch (or that l ended), and wakes WaitFenced when it was the last.
func (m *Manager) sawEpochLocked(l *lease) {
	if l.sawEpoch {
		return
	}
	l.sawEpoch = true
	m.unfenced--
	if m.unfenced <= 0 && !m.fenced {
		m.fenced = true
		close(m.fenceWake)
		m.fenceWake = make(chan struct{})
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
