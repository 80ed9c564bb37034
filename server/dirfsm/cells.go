package dirfsm

import (
	"errors"
	"slices"
	"sort"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// replica is one replica of a cell, as the directory records it.
type replica struct {
	ReplicaID uint64 `json:"replica_id"`
	Lockd     uint64 `json:"lockd"`
	Learner   bool   `json:"learner,omitempty"`
	Initial   bool   `json:"initial,omitempty"`
	Pending   string `json:"pending,omitempty"`
	Joined    bool   `json:"joined_learner,omitempty"` // added as a learner
	Restored  bool   `json:"restored,omitempty"`       // starts only from an imported backup
}

type cellRec struct {
	Name        string    `json:"name"`
	ShardID     uint64    `json:"shard_id"`
	NextReplica uint64    `json:"next_replica"`
	Replicas    []replica `json:"replicas"`
	// RestoreIndex is the backup index of the latest restore plan.
	RestoreIndex uint64 `json:"restore_index,omitempty"`
	// Restores counts the cell's restore plans (api.CellInfo.Restores).
	Restores uint64 `json:"restores,omitempty"`
	// Timing is the cell's own timing, fixed at its creation (nil: the
	// lockds' defaults).
	Timing *api.CellTiming `json:"timing,omitempty"`
}

func checkCellName(name string) *api.Error {
	if name == "" || len(name) > 64 {
		return api.Errorf(api.CodeBadRequest, "a cell name is 1 to 64 characters")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return api.Errorf(api.CodeBadRequest, "cell name %q: use a-z, 0-9, - and _", name)
		}
	}
	return nil
}

func (s *State) createCell(r *api.CreateCellRequest) Result {
	if err := checkCellName(r.Name); err != nil {
		return Result{Err: err}
	}
	if _, dup := s.cells[r.Name]; dup {
		return refuse(api.CodeConflict, "cell %s exists", r.Name)
	}
	n := r.Replicas
	if n == 0 {
		n = len(r.On)
	}
	if n == 0 {
		n = 5
	}
	if n != 3 && n != 5 {
		return refuse(api.CodeBadRequest, "a cell has 5 replicas (3 allowed), not %d", n)
	}
	var on []uint64
	if len(r.On) > 0 {
		if len(r.On) != n {
			return refuse(api.CodeBadRequest, "%d replicas asked for, %d lockds named", n, len(r.On))
		}
		if err := s.checkOn(r.On); err != nil {
			return Result{Err: err}
		}
		on = slices.Clone(r.On)
	} else {
		var err *api.Error
		if on, err = Place(s.lockdList(), s.load(), n); err != nil {
			return Result{Err: err}
		}
	}
	if s.nextShard >= directory.ShardID {
		return refuse(api.CodeConflict, "no shard id left")
	}
	if err := checkTiming(r.Timing); err != nil {
		return Result{Err: err}
	}
	cr := &cellRec{Name: r.Name, ShardID: s.nextShard, NextReplica: 1, Timing: cloneTiming(r.Timing)}
	s.nextShard++
	for _, id := range on {
		cr.Replicas = append(cr.Replicas, replica{ReplicaID: cr.NextReplica, Lockd: id, Initial: true})
		cr.NextReplica++
	}
	s.cells[r.Name] = cr
	info := s.cellInfo(cr)
	return Result{Cell: &info}
}

// checkOn checks lockds named for a cell's replicas: each known, none
// twice.
func (s *State) checkOn(on []uint64) *api.Error {
	seen := map[uint64]bool{}
	for _, id := range on {
		if _, ok := s.lockds[id]; !ok {
			return api.Errorf(api.CodeNotFound, "no lockd %d", id)
		}
		if seen[id] {
			return api.Errorf(api.CodeConflict, "two replicas of one cell on lockd %d: a process holds at most one replica of a cell", id)
		}
		seen[id] = true
	}
	return nil
}

// load counts the replicas each lockd hosts (directory group included).
func (s *State) load() map[uint64]int {
	n := map[uint64]int{}
	for _, c := range s.cells {
		for _, r := range c.Replicas {
			n[r.Lockd]++
		}
	}
	for _, id := range s.dirLockds {
		n[id]++
	}
	return n
}

// Place picks n lockds for a new cell's replicas: never two on one lockd,
// as many zones as there are, and the least loaded lockds first (ties by
// id, so every replica of the directory places alike).
func Place(lockds []api.LockdInfo, load map[uint64]int, n int) ([]uint64, *api.Error) {
	if len(lockds) < n {
		return nil, api.Errorf(api.CodeConflict, "%d replicas need %d lockds; the directory knows %d", n, n, len(lockds))
	}
	picked := map[uint64]bool{}
	inZone := map[string]int{}
	var out []uint64
	for len(out) < n {
		var best *api.LockdInfo
		for i := range lockds {
			l := &lockds[i]
			if picked[l.ID] {
				continue
			}
			if best == nil || inZone[l.Zone] < inZone[best.Zone] ||
				inZone[l.Zone] == inZone[best.Zone] && (load[l.ID] < load[best.ID] || load[l.ID] == load[best.ID] && l.ID < best.ID) {
				best = l
			}
		}
		picked[best.ID] = true
		inZone[best.Zone]++
		out = append(out, best.ID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// checkTiming refuses a cell timing that cannot work (nil: the defaults).
func checkTiming(t *api.CellTiming) *api.Error {
	if t == nil {
		return nil
	}
	if err := t.Check(); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return ae
		}
		return api.Errorf(api.CodeBadRequest, "%v", err)
	}
	return nil
}

// cloneTiming copies a timing; all-default is stored as nil.
func cloneTiming(t *api.CellTiming) *api.CellTiming {
	if t == nil || t.IsZero() {
		return nil
	}
	c := *t
	return &c
}
