package cell

import (
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// afterApply updates the leader-only soft state after an entry applied. It
// runs under dragonboat's write lock on the state, so it is ordered exactly
// with applies and with lookups.
func (c *Cell) afterApply(s *fsm.State, a *fsm.Applied) {
	// The change feed's long polls (changefeed.go).
	c.changeWaiters.wake(a.Changes)
	var by uint64 // a session's own delete: its client learns of it from the reply
	if a.Cmd.Op == fsm.OpDelete {
		by = a.Cmd.Session
	}
	if n := c.watches.Apply(a.Changes, by); len(a.Changes) > 0 && c.cfg.Fanout != nil {
		if active, _ := c.sessions.Active(); active {
			c.cfg.Fanout(api.Prefix(a.Changes[0].Path), n) // one entry changes one prefix
		}
	}
	for _, ch := range a.Changes {
		switch ch.Type {
		case fsm.ChangeLockDelay:
			if d, ok := s.LockDelayOf(ch.Path); ok {
				c.delays.released(ch.Path, d.Since, d.MS, time.Now())
			}
		case fsm.ChangeLockDelayEnded:
			c.delays.ended(ch.Path)
		}
	}
	cmd, res := &a.Cmd, &a.Result
	switch cmd.Op {
	case fsm.OpLeaderStart:
		if res.Err != nil {
			break // a stale leader_start changed nothing
		}
		c.clock.Applied(s.Epoch())
		c.inflight.settled(cmd.Term) // proposals of ended leaderships not applied by now never will be
		if cmd.ReplicaID == c.cfg.ReplicaID && c.leading(cmd.Term) {
			if active, epoch := c.sessions.Active(); active && epoch == s.Epoch() {
				break // a second copy of the running leadership's own: keep its leases and watches
			}
			c.watches.Reset()
			c.cachers.Reset()
			c.sessions.Start(s.Epoch(), s.Sessions())
			if api.RestoredLeadership(s.Epoch()) {
				c.sessions.HoldAll()
			}
			c.delays.start(s.Epoch(), s.LockDelays(), time.Now())
			c.signalChange()
		} else {
			c.sessions.Stop()
			c.delays.stop()
			c.watches.Reset()
			c.changeWaiters.wakeAll()
		}
	case fsm.OpHandOver:
		if res.Err == nil {
			c.clock.HandedOver(s.Epoch(), res.Index) // what the next leader_start measures from
		}
	case fsm.OpOpenSession:
		// A session's id is the index of the entry that opened it; a
		// retried open answered with an older session keeps that lease.
		if res.Err == nil && res.Session == res.Index {
			c.sessions.Opened(res.Session, res.LeaseMS)
		}
	case fsm.OpCacheSession:
		if res.Err == nil {
			c.sessions.MarkCaches(cmd.Target)
		}
	case fsm.OpCloseSession, fsm.OpExpireSession:
		id := cmd.Session
		if cmd.Op == fsm.OpExpireSession {
			id = cmd.Target
		}
		if s.SessionExists(id) != nil {
			c.sessions.Ended(id)
			c.watches.DropSession(id)
			c.cachers.Forget(id)
		}
	case fsm.OpCreate:
		// A lock node that must wait gets its predecessor watch armed by the
		// same apply: no extra round trip, and no window to miss the delete.
		// A node granted at once gets the holder's watch on its own node
		// instead (deletion by anyone else means the lock is lost), so an
		// uncontended acquire is one request and one commit.
		if res.Err != nil || cmd.Lock == api.LockNone || res.Node == nil {
			break
		}
		if active, epoch := c.sessions.Active(); active && epoch == s.Epoch() {
			if res.WaitFor != "" {
				c.armPredecessor(s, cmd.Session, res.WaitFor)
			} else {
				c.armOwn(s, cmd.Session, res.Node.Path)
			}
		}
	case fsm.OpSetLockMode:
		// An upgrade that must wait gets the watch on what it waits for
		// in the same apply (its own node's watch stays, as a holder's).
		if res.Err != nil || res.WaitFor == "" {
			break
		}
		if active, epoch := c.sessions.Active(); active && epoch == s.Epoch() {
			c.armPredecessor(s, cmd.Session, res.WaitFor)
		}
	}
}

// armPredecessor arms a waiter's deletion watch on its predecessor. A
// retried create is answered from the dedupe window with the first
// attempt's wait_for, which may have been deleted since: then the deleted
// event fires at once (a watch on a node that is gone would never fire).
// A lock node's path is never reused (its sequence number only grows), so
// "no lock node there" means that predecessor is gone.
func (c *Cell) armPredecessor(s *fsm.State, session uint64, waitFor string) {
	if _, delayed := s.LockDelayOf(waitFor); delayed {
		c.watches.Register(session, tenantOf(s, session), waitFor, api.WatchData) // the lock's directory, in lock-delay
		return
	}
	if exists, _, _, _ := s.LockState(waitFor); exists {
		c.watches.Register(session, tenantOf(s, session), waitFor, api.WatchData)
		return
	}
	c.watches.FireNow(session, api.Event{Type: api.EventDeleted, Path: waitFor, Kind: api.WatchData, Index: s.Index()})
}

// armOwn arms a holder's deletion watch on its own lock node; if the node
// is already gone (a retried create answered from the dedupe window), the
// deleted event fires at once.
func (c *Cell) armOwn(s *fsm.State, session uint64, node string) {
	if exists, _, _, _ := s.LockState(node); exists {
		c.watches.Register(session, tenantOf(s, session), node, api.WatchData)
		return
	}
	c.watches.FireNow(session, api.Event{Type: api.EventDeleted, Path: node, Kind: api.WatchData, Index: s.Index()})
}

// --- Raft plumbing ---
