package sdk

// The holder's side of a Mutex: the monitor that detects the loss of a
// grant (node deleted, session ended, prefix moved) and re-checks it with
// LockState when the lease is certain again after jeopardy.

import (
	"context"
	"errors"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// monitor follows a grant until it ends: deletion of the node (by anyone)
// or the session's end loses the lock; after the session is safe again
// the node is re-checked with LockState before Context is live again.
func (m *Mutex) monitor(g *grant, nodeCh <-chan api.Event) {
	defer close(g.done)
	s := g.s
	retryTimer := time.NewTimer(time.Hour)
	retryTimer.Stop()
	defer retryTimer.Stop()
	var retry <-chan time.Time // set while a failed re-check waits to be tried again
	for attempt := 0; ; {
		if nodeCh == nil {
			gr, ch, err := s.getW(g.ctx, g.node)
			switch {
			case g.ctx.Err() != nil:
				m.sessionEnded(g)
				return
			case sessionGone(err) || errors.Is(err, ErrClosed):
				m.lose(g, err, "its session ended")
				return
			case nodeMovedAway(err) && !mutant.On(mutant.MovedAway):
				m.lose(g, err, "its prefix moved to another cell (the seal deleted its node)")
				return
			case err != nil:
				sleepCtx(g.ctx, backoff(attempt))
				attempt++
				continue
			case !gr.Exists:
				m.lose(g, nil, "its node was deleted")
				return
			}
			attempt, nodeCh = 0, ch
		}
		changed := s.LeaseChanged()
		if retry == nil {
			if lc := m.recheckDue(g); lc != nil && !m.recheck(g, lc) {
				retryTimer.Reset(backoff(attempt))
				attempt++
				retry = retryTimer.C
			}
		}
		select {
		case <-g.ctx.Done():
			m.sessionEnded(g)
			return
		case ev := <-nodeCh:
			nodeCh = nil
			switch ev.Type {
			case api.EventDeleted:
				m.lose(g, nil, "its node was deleted")
				return
			case EventSessionExpired, EventSessionClosed:
				m.lose(g, s.Err(), "its session ended")
				return
			}
			// A data change (Proclaim) or a resync: re-read and re-arm.
		case <-changed:
		case <-retry:
			retry = nil
		}
	}
}

// recheckDue returns the session's LeaseContext if the lease is certain
// again after jeopardy and the grant has not been re-checked under it.
func (m *Mutex) recheckDue(g *grant) context.Context {
	lc := g.s.LeaseContext()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !g.activeLocked() || g.upgrading || lc == g.base || !g.s.certain(lc) {
		return nil // an Upgrade re-checks the grant itself (rwlock.go)
	}
	return lc
}

// recheck confirms with LockState that the node still holds (pitfall 7)
// and, if so, makes Context live again under lc. It reports false if it
// should be tried again.
func (m *Mutex) recheck(g *grant, lc context.Context) bool {
	st, _, err := g.s.lockState(g.ctx, g.node, false)
	if err != nil {
		if g.ctx.Err() != nil {
			return true
		}
		if sessionGone(err) || errors.Is(err, ErrClosed) {
			m.lose(g, err, "its session ended")
			return true
		}
		if nodeMovedAway(err) && !mutant.On(mutant.MovedAway) {
			m.lose(g, err, "its prefix moved to another cell (the seal deleted its node)")
			return true
		}
		m.c.log.Warn("lock re-check after jeopardy failed", "node", g.node, "err", err)
		return false
	}
	if !st.Exists || !st.Held || st.Token != g.token {
		m.lose(g, nil, "its node no longer holds after jeopardy")
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !g.activeLocked() || g.s.LeaseContext() != lc || !g.s.certain(lc) {
		return true // back in doubt already: the next change re-checks
	}
	g.liveCancel()
	g.base = lc
	g.live, g.liveCancel = context.WithCancel(lc)
	g.signalLocked()
	return true
}

// sessionEnded records a loss if the grant's context ended with its session.
func (m *Mutex) sessionEnded(g *grant) {
	if err := g.s.Err(); err != nil {
		m.lose(g, err, "its session ended")
	}
}

// lose marks the grant lost (unless it was released or already lost).
func (m *Mutex) lose(g *grant, cause error, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !g.activeLocked() {
		return
	}
	g.lost = recipeErr(codeLockLost, cause, "lock %s (node %s) lost: %s", m.path, g.node, why)
	g.liveCancel()
	g.cancel()
	g.signalLocked()
	m.c.log.Warn("lock lost", "path", m.path, "node", g.node, "why", why)
}
