package fake

// Leadership, faked: which replica leads is the test's to say. A new
// leadership is a real leader_start entry (the epoch is the state's).

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// SetLeader makes replica i the leader (-1: none) without a fail-over:
// same epoch, sessions and watches; long-polls in flight are not woken.
func (c *Cell) SetLeader(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = i
}

// SetHint sets whether followers name the leader in not_leader replies.
func (c *Cell) SetHint(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hint = on
}

// Failover moves the leader to replica i with a leader_start entry of
// the next term, which bumps the leader epoch; the new leader has none of
// the old one's in-memory watches or queued events.
func (c *Cell) Failover(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = i
	_, term := c.st.Leader()
	c.leaderStartLocked(term + 1)
}

// leaderStartLocked commits the current leader's leader_start of term.
func (c *Cell) leaderStartLocked(term uint64) *api.Error {
	res := c.proposeLocked(&fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: uint64(c.leader + 1), Term: term, Epoch: c.st.Epoch()})
	return res.Err
}

func (c *Cell) notLeaderLocked() (int, any) {
	e := api.Errorf(api.CodeNotLeader, "not the leader")
	if c.hint && c.leader >= 0 {
		e.Leader = c.replicas[c.leader].addr
	}
	return e.Code.HTTPStatus(), e
}
