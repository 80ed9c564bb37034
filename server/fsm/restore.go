package fsm

import (
	"slices"

	"github.com/lockservice/lockd/internal/mutant"
)

// RestoreStart is the restore plan a replica imported from a backup puts
// on its leader_start (lockd restore took it from the directory). The
// backup's state knows nothing of what the directory did after it: it may
// hold prefixes that moved to another cell since, and the lost cell may
// have had leaders, with higher epochs, that clients have seen. The first
// leader_start after the restore (the state's leader epoch is below
// Floor) makes the state agree with the directory, in one entry, before
// anything is served:
//
//   - every prefix the plan does not give the cell is dropped: its nodes
//     (ephemeral ones too, out of their sessions) and its root, so the
//     cell answers wrong_cell for it and clients ask the directory again;
//     a prefix that had moved away before the backup keeps the sealed
//     root that answers moved;
//   - the leader epoch goes to Floor at least, above every epoch the cell
//     had before the restore (the directory counts restores, and each
//     restore's floor is a multiple of api.LeaderEpochsPerRestore): a
//     client sees a new epoch, flushes its cache and numbers events
//     afresh, and a proxy takes the new leader's events.
//
// A later leader_start carrying the same plan changes nothing of it.
type RestoreStart struct {
	// Floor is the leader epoch the restored cell's first leadership
	// starts at (at least).
	Floor uint64 `json:"floor"`
	// Prefixes are the prefixes the directory gives the cell; their
	// epochs were raised (ensure_prefix) before the leader_start.
	Prefixes []string `json:"prefixes"`
}

// restoreStart applies a restore plan's prefix set at the first
// leader_start after the restore (the caller checked the floor).
func (s *State) restoreStart(index uint64, r *RestoreStart) []Change {
	if mutant.On(mutant.RestoreKeepsPrefixes) {
		return nil
	}
	var changes []Change
	for _, root := range slices.Clone(s.root.children()) { // removes some as it goes
		if slices.Contains(r.Prefixes, root.path) {
			continue
		}
		// Sealed: moved away before the backup; the tombstone answers
		// moved (its nodes, if a drop had not come yet, go).
		changes = append(changes, s.removeSubtree(index, root, root.prefixState != PrefixSealed)...)
		s.dropKeptUnder(root.path) // the prefix's lock-delays are its cell's now
	}
	return changes
}

// leaderEpochAfter is the leader epoch a leader_start moves the state to:
// the next one, or a restore's floor if that is higher.
func (s *State) leaderEpochAfter(r *RestoreStart) uint64 {
	next := s.epoch + 1
	if r != nil && !mutant.On(mutant.RestoreKeepsLeaderEpoch) {
		next = max(next, r.Floor)
	}
	return next
}
