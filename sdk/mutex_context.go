package sdk

// A held Mutex's Context: live while the grant holds and the lease is
// certain, cancelled in jeopardy, live again after the monitor's re-check.

import (
	"context"
	"time"
)

// Context is live while the lock is held and the session's lease is
// certain. It is cancelled the moment the session enters jeopardy, the
// lock is lost (session expired or closed, node deleted by anyone) or
// Unlock is called. After SessionSafe, once the node has been re-checked
// with LockState and still holds, a fresh call returns a live context
// again (same node, same token); a call made while that re-check is in
// flight waits for it (at most the request timeout). Without a grant it
// returns a cancelled context.
func (m *Mutex) Context() context.Context {
	var deadline time.Time
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		g := m.g
		if g == nil || !g.activeLocked() {
			return cancelledCtx
		}
		if g.live.Err() == nil {
			return g.live
		}
		lc := g.s.LeaseContext()
		if lc == g.base || !g.s.certain(lc) {
			return g.live // in doubt (or ended): cancelled
		}
		// Safe again, and the monitor's re-check is due or in flight.
		if deadline.IsZero() {
			deadline = time.Now().Add(m.c.timeout)
		}
		d := time.Until(deadline)
		if d <= 0 {
			return g.live
		}
		ch := g.changed
		m.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ch:
		case <-t.C:
		case <-g.ctx.Done():
		}
		t.Stop()
		m.mu.Lock()
	}
}

// waitLive blocks until the held grant's Context is live (nil), the grant
// is lost or released (an error), or ctx ends.
func (m *Mutex) waitLive(ctx context.Context) error {
	for {
		m.mu.Lock()
		g := m.g
		if g == nil || g.released {
			m.mu.Unlock()
			return recipeErr(codeNotHeld, nil, "mutex %s is not held", m.path)
		}
		if g.lost != nil {
			err := g.lost
			m.mu.Unlock()
			return err
		}
		changed := g.changed
		m.mu.Unlock()
		leaseChanged := g.s.LeaseChanged()
		if m.Context().Err() == nil {
			return nil
		}
		select {
		case <-changed:
		case <-leaseChanged:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
