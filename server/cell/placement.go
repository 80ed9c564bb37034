package cell

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/fsm"
)

// Placement is what the directory says of a cell.
type Placement struct {
	// APIAddrs maps replica id → API address (not_leader hints, hand-off).
	APIAddrs map[uint64]string
	// Prefixes are the prefixes the directory gives the cell.
	Prefixes map[string]PrefixPlacement
	// Index is the directory index this placement was read at.
	Index uint64
	// LogCodec is the directory's log codec floor: the leader raises the
	// cell's codec to it (codec.go).
	LogCodec fsm.LogCodec
}

// PrefixPlacement is one prefix the directory gives a cell.
type PrefixPlacement struct {
	Epoch uint64 // its directory epoch
	// Leaving: a migration away from this cell is in flight (the prefix
	// may be sealed here and must stay so).
	Leaving bool
	// Arriving: the prefix moved here by a committed migration: it is
	// served only from the staged copy of its nodes.
	Arriving bool
}

// currentPlacement is the placement (empty before the first).
func (c *Cell) currentPlacement() *Placement {
	if p := c.placement.Load(); p != nil {
		return p
	}
	return &Placement{}
}

// SetPlacement records the directory's view of this cell. On the leader,
// a prefix newly given to the cell (or given a higher epoch) is adopted:
// ensure_prefix commits it, and a migration's staged copy is served from
// that entry on.
func (c *Cell) SetPlacement(p Placement) {
	c.placement.Store(&p)
	if active, _ := c.sessions.Active(); active {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.adopt()
		}()
	}
}

// adopt brings the state in line with the placement, on the leader: it
// commits ensure_prefix for every prefix the state does not serve at its
// epoch yet, and unseals a prefix sealed by a migration the directory
// has since abandoned (the unseal names the directory index that says
// so, and the state refuses it if the seal is newer). A prefix sealed for
// a move that committed is no longer in the placement and stays sealed.
// Then it raises the cell's log codec to the directory's floor.
// One pass at a time: a call while a pass runs asks for another
// (adoptWanted), which the running pass makes once it ends, from the
// placement as it is then. A placement that arrived during a pass read
// the placement before it is never lost (it was: a prefix assigned just
// as a leader took over stayed "taking up" until the next directory
// change).
func (c *Cell) adopt() { c.adopts.do(c.adoptPass) }

// rerun runs a pass one at a time: a call while a pass runs asks for
// another (wanted) and returns; the running call makes it once its pass
// ends, so no call's request is lost. The zero value is ready.
type rerun struct {
	running, wanted atomic.Bool
}

// maxReruns bounds the passes one call makes back to back (each after a
// call that came during the one before).
const maxReruns = 1000

func (r *rerun) do(pass func()) {
	r.wanted.Store(true)
	for range maxReruns {
		if !r.running.CompareAndSwap(false, true) {
			return // the running call sees wanted
		}
		r.wanted.Store(false)
		pass()
		r.running.Store(false)
		if !r.wanted.Load() || mutant.On(mutant.AdoptLostWakeup) {
			return // broken (mutant): a call during the pass is forgotten
		}
	}
}

// adoptPass is one pass of adopt over the current placement.
func (c *Cell) adoptPass() {
	pl := c.currentPlacement()
	for p, want := range pl.Prefixes {
		if !c.adoptPrefix(p, want, pl.Index) {
			return
		}
	}
	c.adoptCodec(c.currentPlacement().LogCodec) // the latest floor: a placement may have come meanwhile
}

// adoptPrefix brings one prefix in line; false if this replica stopped
// leading (or the cell is closing), which ends the pass.
func (c *Cell) adoptPrefix(p string, want PrefixPlacement, dirIndex uint64) bool {
	for attempt := 0; attempt < 50; attempt++ {
		if active, _ := c.sessions.Active(); !active {
			return false
		}
		cmd := fsm.Command{Op: fsm.OpEnsurePrefix, Path: p, Epoch: want.Epoch, Staged: want.Arriving, AtMS: time.Now().UnixMilli()}
		if st, err := readLocal(c, prefixQuery{prefix: p}.run); err == nil {
			switch {
			case st.State == fsm.PrefixStaging,
				st.State == fsm.PrefixServing && st.Epoch >= want.Epoch,
				st.State == fsm.PrefixSealed && (want.Leaving || st.SealDirIndex > dirIndex):
				return true // nothing to do, or nothing it may do
			case st.State == fsm.PrefixSealed:
				cmd = fsm.Command{Op: fsm.OpUnsealPrefix, Path: p, DirIndex: dirIndex, AtMS: time.Now().UnixMilli()}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.propose(ctx, &cmd)
		cancel()
		if err == nil {
			c.log.Info("prefix adopted", "prefix", p, "op", cmd.Op, "epoch", want.Epoch, "directory_index", dirIndex)
			continue // read the state again: an unseal is followed by the epoch check
		}
		if code := api.CodeOf(err); code != api.CodeUnavailable && code != api.CodeNotLeader {
			c.log.Warn("prefix not adopted", "prefix", p, "op", cmd.Op, "err", err)
			return true
		}
		select {
		case <-c.stop:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}
