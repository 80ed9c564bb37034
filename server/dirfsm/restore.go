package dirfsm

import (
	"slices"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// restore plans a cell's rebuild from its backup: the cell gets new
// replicas (fresh ids, so no member of the lost group is ever confused
// with one of the new; all initial, all to be imported), and each of its
// prefixes epoch + 1. The restored cell's log continues from the backup's
// index, so without the raise it would issue again the tokens the lost
// cell issued after the backup. A second plan supersedes the first (its
// imports must be done again); the replicas of the old group are stopped
// by their lockds as soon as they read it.
//
// The plan, not the backup, says what the restored cell serves: exactly
// the prefixes the directory gives it now, at these raised epochs (a
// prefix of the backup that moved away since is dropped), and it counts
// the cell's restores, whose count sets the restored leader's lowest
// epoch (Directory.RestorePlan).
func (s *State) restore(r *api.RestoreCellRequest) Result {
	c, ok := s.cells[r.Cell]
	if !ok {
		return refuse(api.CodeNotFound, "no cell %s", r.Cell)
	}
	if r.BackupIndex == 0 {
		return refuse(api.CodeBadRequest, "a restore names the backup it restores (its index, as lockctl backup printed it)")
	}
	if c.Restores >= api.MaxRestoresPerCell {
		return refuse(api.CodeLimitExceeded, "cell %s was restored %d times, the limit: create a new cell and move its prefixes there", r.Cell, c.Restores)
	}
	var prefixes []*api.PrefixInfo
	for _, p := range s.prefixes {
		if p.Cell == c.Name || p.Migration != nil && p.Migration.To == c.Name {
			if p.Migration != nil {
				return refuse(api.CodeConflict, "prefix %s of cell %s is migrating: finish or abort the migration first (lockctl migrate %s --abort)", p.Prefix, c.Name, p.Prefix)
			}
			if p.Epoch+1 > api.MaxTokenEpoch {
				return refuse(api.CodeTokenExhausted, "prefix %s is at epoch %d, the token limit", p.Prefix, p.Epoch)
			}
			prefixes = append(prefixes, p)
		}
	}
	voters := 0
	for _, rep := range c.Replicas {
		if !rep.Learner {
			voters++
		}
	}
	n := len(r.On)
	if n == 0 {
		n = 5
		if voters < 5 {
			n = 3
		}
	}
	if n != 3 && n != 5 {
		return refuse(api.CodeBadRequest, "a cell has 5 replicas (3 allowed), not %d", n)
	}
	on := slices.Clone(r.On)
	if len(on) > 0 {
		if err := s.checkOn(on); err != nil {
			return Result{Err: err}
		}
	} else {
		load := s.load()
		for _, rep := range c.Replicas {
			load[rep.Lockd]-- // the cell's own replicas are being replaced
		}
		var err *api.Error
		if on, err = Place(s.lockdList(), load, n); err != nil {
			return Result{Err: err}
		}
	}
	c.Replicas = nil
	for _, id := range on {
		c.Replicas = append(c.Replicas, replica{ReplicaID: c.NextReplica, Lockd: id, Initial: true, Restored: true})
		c.NextReplica++
	}
	c.RestoreIndex = r.BackupIndex
	c.Restores++
	if !mutant.On(mutant.RestoreKeepsEpoch) {
		for _, p := range prefixes {
			p.Epoch++
		}
	}
	return Result{Cell: ptr(s.cellInfo(c))}
}
