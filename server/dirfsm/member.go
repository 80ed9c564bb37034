package dirfsm

import (
	"github.com/lockservice/lockd/api"
)

// minVoters is the fewest voting replicas a cell may be left with: a
// majority of five (three-replica cells have exactly this many).
const minVoters = 3

// member records one membership change of a cell, or confirms (done) or
// takes back (abort) the one in flight. One change at a time per cell;
// add, promote and remove mark the replica pending until the cell's leader
// confirms that its Raft group made the change.
func (s *State) member(r *api.MemberRequest) Result {
	c, ok := s.cells[r.Cell]
	if !ok {
		return refuse(api.CodeNotFound, "no cell %s", r.Cell)
	}
	if _, ok := s.lockds[r.Lockd]; !ok {
		return refuse(api.CodeNotFound, "no lockd %d", r.Lockd)
	}
	at, pending, voters := scanReplicas(c, r.Lockd)
	var err *api.Error
	switch r.Action {
	case api.MemberAdd:
		err = memberAdd(c, r, at, pending)
	case api.MemberPromote, api.MemberRemove:
		err = memberMark(c, r, at, pending, voters)
	case api.MemberDone, api.MemberAbort:
		memberSettle(c, r, at)
	default:
		return refuse(api.CodeBadRequest, "unknown member action %q", r.Action)
	}
	if err != nil {
		return Result{Err: err}
	}
	return Result{Cell: ptr(s.cellInfo(c))}
}

// scanReplicas finds, among c's replicas, the index of the one on lockd
// (-1: none), the one with a change pending (nil: none) and the number
// of voters.
func scanReplicas(c *cellRec, lockd uint64) (at int, pending *replica, voters int) {
	at = -1
	for i := range c.Replicas {
		rep := &c.Replicas[i]
		if rep.Lockd == lockd {
			at = i
		}
		if rep.Pending != "" {
			pending = rep
		}
		if !rep.Learner {
			voters++
		}
	}
	return at, pending, voters
}

// memberBusy refuses a change while another one is in flight.
func memberBusy(r *api.MemberRequest, pending *replica) *api.Error {
	return api.Errorf(api.CodeConflict, "cell %s has a membership change in flight (%s of the replica on lockd %d): one at a time", r.Cell, pending.Pending, pending.Lockd)
}

// memberAdd adds a replica on r.Lockd, pending (a pending add resumes).
func memberAdd(c *cellRec, r *api.MemberRequest, at int, pending *replica) *api.Error {
	if at >= 0 {
		if c.Replicas[at].Pending == api.MemberAdd {
			return nil // resumed
		}
		return api.Errorf(api.CodeConflict, "lockd %d already hosts a replica of cell %s: a process holds at most one replica of a cell", r.Lockd, r.Cell)
	}
	if pending != nil {
		return memberBusy(r, pending)
	}
	c.Replicas = append(c.Replicas, replica{ReplicaID: c.NextReplica, Lockd: r.Lockd, Learner: r.Learner, Joined: r.Learner, Pending: api.MemberAdd})
	c.NextReplica++
	return nil
}

// memberMark marks the replica on r.Lockd pending promotion or removal (the
// same change pending resumes): a learner only is promoted, and a removal
// leaves at least minVoters voters.
func memberMark(c *cellRec, r *api.MemberRequest, at int, pending *replica, voters int) *api.Error {
	if at < 0 {
		return api.Errorf(api.CodeNotFound, "lockd %d hosts no replica of cell %s", r.Lockd, r.Cell)
	}
	rep := &c.Replicas[at]
	if rep.Pending == r.Action {
		return nil // resumed
	}
	if pending != nil {
		return memberBusy(r, pending)
	}
	if r.Action == api.MemberPromote && !rep.Learner {
		return api.Errorf(api.CodeConflict, "the replica of cell %s on lockd %d already votes", r.Cell, r.Lockd)
	}
	if r.Action == api.MemberRemove && !rep.Learner && voters-1 < minVoters {
		return api.Errorf(api.CodeConflict, "removing the replica on lockd %d would leave cell %s %d voters: it keeps at least %d (add one first)", r.Lockd, r.Cell, voters-1, minVoters)
	}
	rep.Pending = r.Action
	return nil
}

// memberSettle ends the change pending on r.Lockd's replica: done makes
// it so, abort takes it back (nothing pending: confirmed already).
func memberSettle(c *cellRec, r *api.MemberRequest, at int) {
	if at < 0 || c.Replicas[at].Pending == "" {
		return // confirmed already
	}
	rep := &c.Replicas[at]
	switch {
	case rep.Pending == api.MemberAdd && r.Action == api.MemberAbort,
		rep.Pending == api.MemberRemove && r.Action == api.MemberDone:
		c.Replicas = append(c.Replicas[:at], c.Replicas[at+1:]...)
	case rep.Pending == api.MemberPromote && r.Action == api.MemberDone:
		rep.Learner, rep.Pending = false, ""
	default:
		rep.Pending = ""
	}
}
