package lockd

import (
	"context"
	"fmt"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/server/dirfsm"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cell"
)

// ChangeMember makes one membership change of cell c, which this lockd
// leads: it checks the cell can commit now (else it refuses, having
// changed nothing), records the change in the directory (pending: the
// lockd that is to host a new replica starts it, as a joining one), makes
// it in the cell's Raft group, and confirms it in the directory; if the
// group did not make it, the directory takes it back. A change the
// directory refuses (a second replica on one lockd, too few voters left,
// another change in flight) changes nothing either.
func (p *Process) ChangeMember(ctx context.Context, c *cell.Cell, req api.MemberRequest) (api.CellInfo, error) {
	// Each Raft step is bounded on its own: a replica that loses
	// leadership during the call would otherwise hold it to the caller's
	// whole deadline (dragonboat answers a deposed leader's requests only
	// by their timeout), while the caller could have retried on the new
	// leader.
	// Each step is logged when it fails or is slow (a healthy cell takes
	// milliseconds): the only trace of where a stuck change waited.
	step := func(name string, start time.Time, err error) {
		if took := time.Since(start); err != nil || took > time.Second {
			p.log.Warn("membership change step slow or failed", "cell", req.Cell, "action", req.Action, "lockd", req.Lockd,
				"step", name, "took", took.Round(time.Millisecond), "err", err)
		}
	}
	start := time.Now()
	mctx, cancel := context.WithTimeout(ctx, memberStepTimeout)
	_, err := c.Membership(mctx)
	cancel()
	step("read membership", start, err)
	if err != nil {
		return api.CellInfo{}, api.Errorf(api.CodeUnavailable, "cell %s cannot commit a membership change now (%v); nothing changed", req.Cell, err)
	}
	start = time.Now()
	res, err := p.ProposeDirectory(ctx, &dirfsm.Command{Op: dirfsm.OpMember, Member: &req})
	step("record in the directory", start, err)
	if err != nil {
		return api.CellInfo{}, err
	}
	rep := replicaOn(res.Cell, req.Lockd)
	if rep == nil {
		return api.CellInfo{}, api.Errorf(api.CodeInternal, "the directory has no replica of %s on lockd %d after %s", req.Cell, req.Lockd, req.Action)
	}
	raftAddr, err := p.raftAddr(ctx, req.Lockd)
	if err != nil {
		return api.CellInfo{}, err
	}
	start = time.Now()
	change := changeRaftGroup(ctx, c, req.Action, rep, raftAddr)
	step("change the Raft group", start, change)
	verdict, err := memberVerdict(c, req, rep.ReplicaID, change)
	if err != nil {
		return api.CellInfo{}, err
	}
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start = time.Now()
	res, err = p.ProposeDirectory(dctx, &dirfsm.Command{Op: dirfsm.OpMember, Member: &api.MemberRequest{Cell: req.Cell, Action: verdict, Lockd: req.Lockd}})
	step("confirm in the directory", start, err)
	if err != nil {
		return api.CellInfo{}, fmt.Errorf("%s made in the cell, not yet confirmed in the directory (run it again): %w", req.Action, err)
	}
	if verdict == api.MemberAbort {
		return *res.Cell, api.Errorf(api.CodeUnavailable, "cell %s could not commit the %s (%v); nothing changed", req.Cell, req.Action, change)
	}
	p.log.Info("membership changed", "cell", req.Cell, "action", req.Action, "lockd", req.Lockd, "replica_id", rep.ReplicaID)
	return *res.Cell, nil
}

// replicaOn is cell's replica on lockd, nil if none.
func replicaOn(cell *api.CellInfo, lockd uint64) *api.ReplicaInfo {
	var rep *api.ReplicaInfo
	for i := range cell.Replicas {
		if cell.Replicas[i].Lockd == lockd {
			rep = &cell.Replicas[i]
		}
	}
	return rep
}

// changeRaftGroup makes action's change of rep (on raftAddr) in c's Raft
// group, bounded by memberStepTimeout.
func changeRaftGroup(ctx context.Context, c *cell.Cell, action string, rep *api.ReplicaInfo, raftAddr string) error {
	var change error
	cctx, cancel := context.WithTimeout(ctx, memberStepTimeout)
	switch action {
	case api.MemberAdd:
		change = c.AddReplica(cctx, rep.ReplicaID, raftAddr, rep.Learner)
	case api.MemberPromote:
		change = c.AddReplica(cctx, rep.ReplicaID, raftAddr, false)
	case api.MemberRemove:
		change = c.RemoveReplica(cctx, rep.ReplicaID)
	}
	cancel()
	return change
}

// memberStepTimeout bounds each Raft step of a membership change: a
// healthy cell takes milliseconds.
const memberStepTimeout = 10 * time.Second

// memberRaft is what deciding a membership change's outcome reads of the
// cell's Raft group: a *cell.Cell, or a fake in the tests.
type memberRaft interface {
	Membership(ctx context.Context) (cell.Members, error)
	Barrier(ctx context.Context) error
}

// memberVerdict is what the directory records of a change the cell's
// Raft group was asked to make (change: that request's error): done if
// the group made it, abort if it did not; an error, recording nothing
// (the change stays pending), if that is not known.
func memberVerdict(r memberRaft, req api.MemberRequest, replicaID uint64, change error) (string, error) {
	if change == nil {
		return api.MemberDone, nil
	}
	// Did the group make it anyway? A request that timed out may have
	// left the change in the leader's log, to commit later: a read now
	// would not show it. So an entry proposed after it commits first (a
	// barrier): then the change has committed, or never will (Raft
	// commits a log in order, and a new leader's log holds every
	// committed entry). Until one does, the outcome is unknown and the
	// directory records nothing.
	vctx, cancel := context.WithTimeout(context.Background(), api.MemberOutcomeTimeout)
	defer cancel()
	var err error
	if !mutant.On(mutant.MemberNoBarrier) {
		err = r.Barrier(vctx)
	}
	var m cell.Members
	if err == nil {
		m, err = r.Membership(vctx)
	}
	if err != nil {
		return "", api.Errorf(api.CodeUnavailable, "%s of the replica on lockd %d: %v; whether the cell made it is not known yet (%v): the change is still pending: run it again", req.Action, req.Lockd, change, err)
	}
	if !made(m, req.Action, replicaID) {
		return api.MemberAbort, nil
	}
	return api.MemberDone, nil
}

// made reports whether the group's membership shows the change.
func made(m cell.Members, action string, id uint64) bool {
	_, voter := m.Voters[id]
	_, learner := m.Learners[id]
	switch action {
	case api.MemberAdd:
		return voter || learner
	case api.MemberPromote:
		return voter
	}
	return !voter && !learner
}

// raftAddr is a lockd's Raft address, from the view or else the directory.
func (p *Process) raftAddr(ctx context.Context, id uint64) (string, error) {
	if l, ok := p.view.Load().Lockd(id); ok {
		return l.RaftAddr, nil
	}
	d, err := p.ReadDirectory(ctx)
	if err != nil {
		return "", err
	}
	for _, l := range d.Lockds {
		if l.ID == id {
			return l.RaftAddr, nil
		}
	}
	return "", api.Errorf(api.CodeNotFound, "no lockd %d", id)
}
