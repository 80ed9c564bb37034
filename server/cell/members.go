package cell

import (
	"context"
	"errors"

	"github.com/lni/dragonboat/v4"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// Members is the cell's Raft membership as this replica's group has
// committed it: voters and non-voting replicas, by replica id.
type Members struct {
	Voters, Learners map[uint64]string
	Removed          map[uint64]struct{}
	ConfigChangeID   uint64
}

// Membership reads the cell's membership (linearizably: through a quorum,
// so a cell that cannot commit answers unavailable).
func (c *Cell) Membership(ctx context.Context) (Members, error) {
	m, err := c.nh.SyncGetShardMembership(ctx, c.cfg.Info.ShardID)
	if err != nil {
		return Members{}, raftError(err)
	}
	return Members{Voters: m.Nodes, Learners: m.NonVotings, Removed: m.Removed, ConfigChangeID: m.ConfigChangeID}, nil
}

// Barrier commits an entry that changes nothing (an empty confirm,
// refused if the leader epoch has moved on, which commits it all the
// same). Once it has, every entry proposed before it, a membership change
// among them, has committed or never will: Raft commits a log in order,
// and a new leader's log holds every committed entry.
func (c *Cell) Barrier(ctx context.Context) error {
	_, epoch := c.sessions.Active()
	_, err := c.propose(ctx, &fsm.Command{Op: fsm.OpConfirm, Epoch: epoch})
	if err == nil || IsRefusal(err) {
		return nil
	}
	return err
}

// AddReplica adds a replica (a non-voting one when learner) at the
// NodeHost raft address addr; promoting a learner is adding it as a voter.
// Already there (a retry): nothing to do.
func (c *Cell) AddReplica(ctx context.Context, replicaID uint64, addr string, learner bool) error {
	m, err := c.Membership(ctx)
	if err != nil {
		return err
	}
	if _, gone := m.Removed[replicaID]; gone {
		return api.Errorf(api.CodeConflict, "replica %d was removed from cell %s; ids are never reused", replicaID, c.cfg.Info.Name)
	}
	if _, ok := m.Voters[replicaID]; ok {
		return nil
	}
	if _, ok := m.Learners[replicaID]; ok && learner {
		return nil
	}
	if learner {
		err = c.nh.SyncRequestAddNonVoting(ctx, c.cfg.Info.ShardID, replicaID, addr, m.ConfigChangeID)
	} else {
		err = c.nh.SyncRequestAddReplica(ctx, c.cfg.Info.ShardID, replicaID, addr, m.ConfigChangeID)
	}
	return membershipError(err)
}

// RemoveReplica removes a replica from the group. Gone already: nothing.
func (c *Cell) RemoveReplica(ctx context.Context, replicaID uint64) error {
	m, err := c.Membership(ctx)
	if err != nil {
		return err
	}
	_, voter := m.Voters[replicaID]
	_, learner := m.Learners[replicaID]
	if !voter && !learner {
		return nil
	}
	return membershipError(c.nh.SyncRequestDeleteReplica(ctx, c.cfg.Info.ShardID, replicaID, m.ConfigChangeID))
}

func membershipError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, dragonboat.ErrRejected) {
		// Another change got in first (the config change index moved).
		return api.Errorf(api.CodeUnavailable, "membership change rejected (another change came first): %v", err)
	}
	return raftError(err)
}

// TransferTo hands this cell's leadership (held here) to the replica
// replicaID, a planned hand-over (handover.go), and waits for it to move
// (at most an election timeout and a quarter): unavailable if it did not.
func (c *Cell) TransferTo(replicaID uint64) error {
	if err := c.Ready(); err != nil {
		return err
	}
	return c.handOverTo(replicaID, c.handOverWait(), false)
}

// Stop stops this replica for good (it was removed from the cell): the
// shard stops on the NodeHost, and its data may be removed. It reports
// whether a running replica was stopped (dragonboat unloads it later).
func (c *Cell) Stop() (bool, error) {
	c.Close()
	err := c.nh.StopReplica(c.cfg.Info.ShardID, c.cfg.ReplicaID)
	if errors.Is(err, dragonboat.ErrShardNotFound) {
		return false, nil
	}
	return err == nil, err
}
