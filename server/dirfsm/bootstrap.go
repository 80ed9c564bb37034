package dirfsm

import (
	"slices"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// Bootstrap is the first state of a new cluster, from the static flags of
// the lockds that host the directory group. It applies only to an empty
// directory: a lockd restarted with other flags changes nothing.
type Bootstrap struct {
	Lockds []api.LockdInfo `json:"lockds"`
	// DirectoryLockds host the directory group (replica id = lockd id).
	DirectoryLockds []uint64   `json:"directory_lockds"`
	Cells           []BootCell `json:"cells"`
}

// BootCell is a cell of the bootstrap flags: its replicas' ids are the
// ids of the lockds hosting them.
type BootCell struct {
	Name     string          `json:"name"`
	ShardID  uint64          `json:"shard_id"`
	Prefixes []string        `json:"prefixes"`
	Epoch    uint64          `json:"epoch,omitempty"`
	Lockds   []uint64        `json:"lockds"`
	Timing   *api.CellTiming `json:"timing,omitempty"`
}

func (s *State) bootstrap(b *Bootstrap) Result {
	if !s.Empty() {
		return Result{} // already bootstrapped: every later copy is a no-op
	}
	next := NewState()
	for _, l := range b.Lockds {
		if r := next.register(l); r.Err != nil {
			return r
		}
	}
	for _, id := range b.DirectoryLockds {
		if _, ok := next.lockds[id]; !ok {
			return refuse(api.CodeBadRequest, "directory replica on unknown lockd %d", id)
		}
	}
	next.dirLockds = slices.Clone(b.DirectoryLockds)
	for _, bc := range b.Cells {
		if err := checkCellName(bc.Name); err != nil {
			return Result{Err: err}
		}
		if _, dup := next.cells[bc.Name]; dup {
			return refuse(api.CodeBadRequest, "cell %s listed twice", bc.Name)
		}
		if bc.ShardID == 0 || bc.ShardID >= directory.ShardID {
			return refuse(api.CodeBadRequest, "cell %s: shard id %d outside [1, %d)", bc.Name, bc.ShardID, directory.ShardID)
		}
		for _, other := range next.cells {
			if other.ShardID == bc.ShardID {
				return refuse(api.CodeBadRequest, "cells %s and %s share shard id %d", other.Name, bc.Name, bc.ShardID)
			}
		}
		if err := checkTiming(bc.Timing); err != nil {
			return Result{Err: err}
		}
		cr := &cellRec{Name: bc.Name, ShardID: bc.ShardID, Timing: cloneTiming(bc.Timing)}
		for _, id := range bc.Lockds {
			if _, ok := next.lockds[id]; !ok {
				return refuse(api.CodeBadRequest, "cell %s: replica on unknown lockd %d", bc.Name, id)
			}
			cr.Replicas = append(cr.Replicas, replica{ReplicaID: id, Lockd: id, Initial: true})
			cr.NextReplica = max(cr.NextReplica, id+1)
		}
		next.cells[bc.Name] = cr
		next.nextShard = max(next.nextShard, bc.ShardID+1)
		epoch := max(bc.Epoch, 1)
		if epoch > api.MaxTokenEpoch {
			return refuse(api.CodeTokenExhausted, "cell %s: epoch %d over %d", bc.Name, epoch, uint64(api.MaxTokenEpoch))
		}
		for _, p := range bc.Prefixes {
			if err := checkPrefix(p); err != nil {
				return Result{Err: err}
			}
			if other, dup := next.prefixes[p]; dup {
				return refuse(api.CodeBadRequest, "prefix %s given to %s and %s", p, other.Cell, bc.Name)
			}
			next.prefixes[p] = &api.PrefixInfo{Prefix: p, Cell: bc.Name, Epoch: epoch}
		}
	}
	next.index = s.index
	*s = *next
	return Result{}
}
