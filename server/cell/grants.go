package cell

// Committing cache grants: one entry per session and node at a time
// (concurrent reads of one node by one session share it), metered by the
// caller's write quota (a grant is a write the reader did not ask for).

import (
	"context"
	"sync"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/server/fsm"
)

// GrantCheck reports whether the reader may spend a write on a cache grant
// now (its tenant's writes per second); false: the read is served
// uncached. Nil: always.
type GrantCheck func() bool

// grantKey names one session's grant of one node.
type grantKey struct {
	session uint64
	path    string
}

// grantCall is a grant proposal in flight; done is closed when ok is set.
type grantCall struct {
	done chan struct{}
	ok   bool
}

// grantFlights coalesces concurrent grant proposals. Its size is bounded
// by the reads in flight.
type grantFlights struct {
	mu      sync.Mutex
	pending map[grantKey]*grantCall
}

// do runs propose once for all concurrent callers with key.
func (g *grantFlights) do(ctx context.Context, key grantKey, propose func() bool) bool {
	g.mu.Lock()
	if g.pending == nil {
		g.pending = map[grantKey]*grantCall{}
	}
	if call, ok := g.pending[key]; ok {
		g.mu.Unlock()
		select {
		case <-call.done:
			return call.ok
		case <-ctx.Done():
			return false
		}
	}
	call := &grantCall{done: make(chan struct{})}
	g.pending[key] = call
	g.mu.Unlock()
	call.ok = propose()
	g.mu.Lock()
	delete(g.pending, key)
	g.mu.Unlock()
	close(call.done)
	return call.ok
}

// recordGrant makes sure the session's committed record holds path under
// epoch, committing the grant if it does not. It runs after the session
// is in the cachers table, so a change of path that began since
// invalidates the session, and one that ended before (and dropped path
// from the record) is seen here and the grant made again.
func (c *Cell) recordGrant(ctx context.Context, session uint64, path string, epoch uint64, grant GrantCheck) bool {
	chk, ok := c.cacheCheckOf(path, session, epoch)
	if !ok || !chk.live {
		return false
	}
	if chk.recorded && c.sessions.Caches(session) {
		return true
	}
	return c.grants.do(ctx, grantKey{session, path}, func() bool {
		if grant != nil && !grant() {
			c.grantsRefused.Add(1)
			return false
		}
		cmd := &fsm.Command{Op: fsm.OpCacheSession, Target: session, Path: path, Epoch: epoch}
		if mutant.On(mutant.UnrecordedGrant) {
			cmd = &fsm.Command{Op: fsm.OpCacheSession, Target: session} // the fence before records: the whole cell
		}
		_, err := c.propose(ctx, cmd)
		return err == nil && c.sessions.Caches(session)
	})
}
