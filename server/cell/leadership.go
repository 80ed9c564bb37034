package cell

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/lni/dragonboat/v4/raftio"

	"github.com/lockservice/lockd/server/fsm"
)

// HandOff hands this cell's leadership, if held here, to another voting
// replica (a planned hand-over: handover.go), trying each in turn within
// timeout: a clean stop then costs clients a leader change of a few
// heartbeats, not an election timeout, and a silent session no more than
// what its lease has left.
func (c *Cell) HandOff(timeout time.Duration) {
	leader, _, valid, err := c.nh.GetLeaderID(c.cfg.Info.ShardID)
	if err != nil || !valid || leader != c.cfg.ReplicaID {
		return
	}
	deadline := time.Now().Add(timeout)
	for _, id := range c.handOffTargets(timeout / 4) {
		wait := min(time.Until(deadline), c.handOverWait())
		if wait <= 0 {
			break
		}
		if err := c.handOverTo(id, wait, true); err != nil {
			c.log.Warn("leadership not handed off", "to", id, "err", err)
			continue
		}
		if l, _, ok, _ := c.nh.GetLeaderID(c.cfg.Info.ShardID); ok && l != c.cfg.ReplicaID {
			c.log.Info("leadership handed off", "to", l)
		}
		return
	}
}

// handOffTargets are the cell's other voters in id order (from the
// directory's placement if the membership cannot be read in timeout).
func (c *Cell) handOffTargets(timeout time.Duration) []uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	m, err := c.Membership(ctx)
	cancel()
	ids := slices.Sorted(maps.Keys(m.Voters))
	if err != nil {
		ids = slices.Sorted(maps.Keys(c.currentPlacement().APIAddrs))
	}
	return slices.DeleteFunc(ids, func(id uint64) bool { return id == c.cfg.ReplicaID })
}

// LeaderUpdated is called by the NodeHost's event listener (one goroutine
// for the whole NodeHost: it must not block).
func (c *Cell) LeaderUpdated(info raftio.LeaderInfo) {
	if prev := c.leaderID.Load(); prev != info.LeaderID || c.term.Load() != info.Term {
		c.log.Info("leader change", "replica", c.cfg.ReplicaID, "leader", info.LeaderID, "previous", prev, "term", info.Term)
		c.recent.sawLeader(time.Now(), info.Term, info.LeaderID)
	}
	if info.LeaderID == c.cfg.ReplicaID {
		c.inflight.lead(info.Term, c.inflightGrace()) // inflight.go
	} else {
		c.inflight.lose(c.inflightGrace())
	}
	c.leaderID.Store(info.LeaderID)
	c.term.Store(info.Term)
	defer c.signalChange()
	if info.LeaderID == c.cfg.ReplicaID {
		c.wg.Add(1)
		go c.announce(info.Term)
		return
	}
	// Leadership lost (or unknown): stop at once, before anything else.
	c.sessions.Stop()
	c.delays.stop()
	c.watches.Reset()
	c.cachers.Reset()
	c.changeWaiters.wakeAll() // changes.go: a long poll answers what it has
}

// inflightGrace is how long the proposals of an ended leadership wait for
// a later leader_start to decide their fate: the longest randomized
// election timeout (twice ElectionRTT ticks); a second without a tick
// known (a Cell built without a NodeHost).
func (c *Cell) inflightGrace() time.Duration {
	if g := 2 * time.Duration(c.cfg.ElectionRTT) * c.rtt; g > 0 {
		return g
	}
	return time.Second
}

// leading reports whether the listener says this replica leads term.
func (c *Cell) leading(term uint64) bool {
	return c.leaderID.Load() == c.cfg.ReplicaID && c.term.Load() == term
}

// announce commits the epoch floors, then this leader's leader_start
// entry, then the cell's prefixes. The session manager starts when
// leader_start applies, so nothing is served below a floor. A retry after
// a timeout may commit a second copy; the state machine ignores it.
func (c *Cell) announce(term uint64) {
	defer c.wg.Done()
	for attempt := 0; c.leading(term); attempt++ {
		err := c.raiseFloors()
		if err == nil {
			cmd := c.leaderStartCmd(term) // measured afresh: it must precede its commit
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err = c.propose(ctx, &cmd)
			cancel()
			if err == nil {
				break
			}
		}
		c.log.Warn("leader_start not committed", "term", term, "attempt", attempt, "err", err)
		select {
		case <-c.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.adopt()
}

// raiseFloors commits ensure_prefix for every prefix served here below
// its epoch floor. A prefix not served here (moved away since) has none.
func (c *Cell) raiseFloors() error {
	for p, floor := range c.cfg.EpochFloors {
		st, err := readLocal(c, prefixQuery{prefix: p}.run)
		if err != nil {
			return err
		}
		if st.State != fsm.PrefixServing || st.Epoch >= floor {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = c.propose(ctx, &fsm.Command{Op: fsm.OpEnsurePrefix, Path: p, Epoch: floor})
		cancel()
		if IsRefusal(err) {
			// The read was behind: the prefix is sealed or moved by now,
			// and is not served here at any epoch.
			c.log.Info("epoch floor not raised: the prefix is not served here", "prefix", p, "err", err)
			continue
		}
		if err != nil {
			return err
		}
		c.log.Info("prefix raised to its restore epoch", "prefix", p, "epoch", floor)
	}
	return nil
}

// EpochFloors are the epochs this replica's cell reaches before it serves.
func (c *Cell) EpochFloors() map[string]uint64 { return c.cfg.EpochFloors }

// leaderStartCmd is this replica's leader_start for term, carrying how long
// the previous leadership lasted as this replica saw it (LeaderClock).
func (c *Cell) leaderStartCmd(term uint64) fsm.Command {
	epoch, prev := c.clock.Prev()
	cmd := fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: c.cfg.ReplicaID, Term: term, Epoch: epoch, PrevLeadershipMS: prev, Restored: c.restoreStart()}
	if c.LogCodec() >= fsm.LogCodecV4 {
		cmd.HandOverIndex, cmd.HandOverMS = c.clock.SinceHandOver(epoch) // handover.go
	}
	return cmd
}
