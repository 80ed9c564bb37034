package chaos

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// observer lists the children of every lock path over and over and records
// the holders the lock rules give at the parent's child index: the
// service's own view of who held, independent of the clients.
func (e *env) observer(paths []string) {
	c, err := e.newClient("observer", false, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	last := map[string]uint64{}
	watched := map[string]bool{}
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		for _, p := range paths {
			ctx, cancel := e.callCtx()
			names, parent, err := c.Children(ctx, p)
			cancel()
			if err != nil || parent.ChildIndex == last[p] {
				continue
			}
			last[p] = parent.ChildIndex
			modes, held := check.HoldersOf(names)
			for name, mode := range modes {
				node := api.Join(p, name)
				e.h.AddLockObs(check.LockObs{Lock: p, Node: node, Mode: mode, Index: parent.ChildIndex, Held: held[name], Source: "children"})
				if !watched[node] {
					watched[node] = true
					e.goWorker(func() { e.watchDeletion(c, p, node) })
				}
			}
		}
		sleepCtx(e.ctx, e.cfg.ObservePeriod)
	}
}

// watchDeletion learns the Raft index at which node is deleted: a data
// watch's deleted event carries the index of the delete entry when it
// fires under the leader that armed it. After a fail-over the SDK
// re-registers the watch and the new leader fires it with its current
// index, a later one; such an event (the session's epoch changed between
// the arming read and the event) is not recorded, and the node's held span
// then ends at its last observation.
func (e *env) watchDeletion(c *sdk.Client, lock, node string) {
	for i := 0; i < 1000 && e.ctx.Err() == nil; i++ {
		ctx, cancel := e.callCtx()
		s, err := c.Session(ctx, cellName)
		if err != nil {
			cancel()
			return
		}
		epoch := s.Epoch()
		_, exists, ch, err := c.GetW(ctx, node)
		cancel()
		if err != nil || !exists {
			return
		}
		var ev api.Event
		select {
		case ev = <-ch:
		case <-e.ctx.Done():
			return
		}
		switch {
		case ev.Type == api.EventDeleted:
			if ev.Index > 0 && s.Err() == nil && s.Epoch() == epoch {
				e.h.AddDeletion(check.Deletion{Lock: lock, Node: node, Index: ev.Index})
			}
			return
		case ev.Type != api.EventDataChanged:
			return // the session ended, or a resync: unknown
		}
	}
}
