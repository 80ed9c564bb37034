package cell

import (
	"sort"

	"github.com/lockservice/lockd/server/fsm"
)

// restoreStart is the restore plan this replica's leader_start carries
// if it was imported from a backup by a plan with a leader epoch floor
// (nil otherwise). The state applies it once, at the first leader_start
// after the restore: only the plan's prefixes stay, and the leader epoch
// starts at the floor (fsm/restore.go).
func (c *Cell) restoreStart() *fsm.RestoreStart {
	if c.cfg.LeaderEpochFloor == 0 {
		return nil
	}
	r := &fsm.RestoreStart{Floor: c.cfg.LeaderEpochFloor, Prefixes: make([]string, 0, len(c.cfg.EpochFloors))}
	for p := range c.cfg.EpochFloors {
		r.Prefixes = append(r.Prefixes, p)
	}
	sort.Strings(r.Prefixes)
	return r
}

// LeaderEpochFloor is the leader epoch this replica's cell starts at
// after a restore (0: not restored).
func (c *Cell) LeaderEpochFloor() uint64 { return c.cfg.LeaderEpochFloor }
