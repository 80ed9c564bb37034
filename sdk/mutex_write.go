package sdk

// Writes to a held Mutex's node: Unlock's delete and setValue's
// conditional put (Proclaim).

import (
	"context"
	"errors"

	"github.com/lockservice/lockd/api"
)

// Unlock releases the lock: Context is cancelled at once and the node is
// deleted, which wakes the next waiter. If the delete's outcome is unknown
// (ctx ended, cell unreachable) the error is returned and the delete goes
// on in the background while the session lives. Unlock returns an error
// matching ErrNotHeld if nothing is held, and one matching both ErrNotHeld
// and ErrLockLost if the lock had been lost.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	g := m.g
	if g == nil || g.released {
		m.mu.Unlock()
		return recipeErr(codeNotHeld, nil, "mutex %s is not held", m.path)
	}
	lost := g.lost
	if err := g.s.Err(); lost == nil && err != nil && !errors.Is(err, ErrClosed) {
		// The session ended (expired, or given up after the grace period)
		// before the monitor recorded the loss: the lock is lost, and no
		// delete is sent (the cell may be unreachable).
		lost = recipeErr(codeLockLost, err, "lock %s (node %s) lost: its session ended", m.path, g.node)
	}
	g.released = true
	m.g = nil
	g.liveCancel()
	g.cancel()
	g.signalLocked()
	m.mu.Unlock()
	<-g.done

	if lost != nil {
		if g.s.Err() == nil {
			g.s.cleanup(ctx, cleanupTask{path: g.node}) // in case it exists yet no longer holds
		}
		return recipeErr(codeNotHeld, lost, "mutex %s", m.path)
	}
	req := api.DeleteRequest{Path: g.node}
	var resp api.WriteResponse
	err := g.s.write(ctx, &req.WriteHeader, api.RouteDelete, &req, &resp)
	switch {
	case err == nil || api.CodeOf(err) == api.CodeNoNode:
		return nil
	case errors.Is(err, ErrClosed):
		return ErrClosed
	case sessionGone(err):
		lost := recipeErr(codeLockLost, err, "lock %s lost: its session ended", m.path)
		return recipeErr(codeNotHeld, lost, "mutex %s", m.path)
	case unknownOutcome(err):
		g.s.deferCleanup(cleanupTask{path: g.node})
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

// setValue writes the held node's value, conditional on its version so a
// node that is gone is never re-created as a persistent one.
func (m *Mutex) setValue(ctx context.Context, value []byte) error {
	m.mu.Lock()
	g := m.g
	switch {
	case g == nil || g.released:
		m.mu.Unlock()
		return recipeErr(codeNotHeld, nil, "%s is not held", m.path)
	case g.lost != nil:
		err := g.lost
		m.mu.Unlock()
		return recipeErr(codeNotHeld, err, "%s", m.path)
	case g.live.Err() != nil:
		m.mu.Unlock()
		return recipeErr(codeNotHeld, nil, "%s is in doubt: the session is in jeopardy", m.path)
	}
	version := g.version
	m.mu.Unlock()
	if value == nil {
		value = []byte{}
	}
	for attempt := 0; ; attempt++ {
		req := api.PutRequest{Path: g.node, Value: value, Version: &version}
		var resp api.WriteResponse
		err := g.s.write(ctx, &req.WriteHeader, api.RoutePut, &req, &resp)
		switch {
		case err == nil:
			m.mu.Lock()
			g.version = max(g.version, resp.Node.Version)
			m.value = value
			m.mu.Unlock()
			return nil
		case api.CodeOf(err) == api.CodeNoNode:
			m.lose(g, nil, "its node was deleted")
			return recipeErr(codeLockLost, err, "%s", m.path)
		case sessionGone(err):
			m.lose(g, err, "its session ended")
			return recipeErr(codeLockLost, err, "%s", m.path)
		case api.CodeOf(err) == api.CodeVersionMismatch && attempt == 0:
			// An earlier write whose reply was lost may have applied:
			// adopt the node's version if it is still ours.
			n, gerr := m.c.Get(ctx, g.node)
			if errors.Is(gerr, ErrNoNode) || (gerr == nil && n.Owner != g.s.id) {
				m.lose(g, nil, "its node was deleted")
				return recipeErr(codeLockLost, gerr, "%s", m.path)
			}
			if gerr != nil {
				return gerr
			}
			version = n.Version
		default:
			return err
		}
	}
}
