package fsm

// Lock-delays. After a holder's session ends while it holds a lock with a
// lock-delay, the lock's directory grants nobody who did not hold at the
// release until the leader commits end_lock_delay naming the release (the
// leader times it on its own clock: apply reads none). The delay lives on
// the directory node. Deleting the empty directory does not end it: the
// delay, with the directory's sequence counter, moves to the cell's table
// of deleted directories' delays (State.lockDelays, by path, at most
// api.MaxDeletedLockDelays, and api.MaxDeletedLockDelaysPerTenant for the
// lock directories one tenant owns), and a node made again at the path
// takes both back. A prefix move carries the kept delays under it
// (keptmove.go). So neither the delay nor the lock nodes' sequence restarts with
// the directory, and fencing tokens (create index under the prefix's
// epoch) rise as ever.

import (
	"fmt"
	"maps"
	"sort"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// lockDelay is a lock directory's delay after an unclean release: no lock
// node that did not hold at the release becomes a holder until the leader
// commits end_lock_delay naming the release.
type lockDelay struct {
	index uint64 // the index of the latest unclean release
	ms    int64  // how long from that release
	atMS  int64  // the proposer's wall clock at that release (shown only)
	// keepSeq: the lock nodes up to this sequence number that held at the
	// release still hold (the other shared holders); 0 when none did.
	keepSeq uint64
	// nextSeq, on a deleted directory's delay (State.lockDelays): the
	// directory's sequence counter when it was deleted; tenant, the
	// tenant that owned it (its per-tenant bound counts the delay).
	nextSeq uint64
	tenant  string
}

// releaseLock is called for a lock node n about to be removed because its
// session ended. If n holds the lock and has a lock-delay, it puts n's
// directory in lock-delay from this release: nobody who does not hold
// now is granted the lock until it ends. A delay already running is
// restarted here with the longer of the two lengths, which ends no
// earlier than the one running would have.
func (s *State) releaseLock(index uint64, n *node, atMS int64) (Change, bool) {
	if n.lockDelayMS <= 0 || waitOn(n) != nil {
		return Change{}, false
	}
	dir := n.parent
	var keep uint64
	for _, k := range dir.lockKids {
		held, more := holding(k) // rwlock.go
		if !more {
			break // the holders are a prefix of the queue (but for an upgrade's)
		}
		if held && k != n {
			keep = k.seq
		}
	}
	ms := int64(n.lockDelayMS)
	if dir.delay != nil {
		ms = max(ms, dir.delay.ms)
	}
	s.touch(dir)
	dir.delay = &lockDelay{index: index, ms: ms, atMS: atMS, keepSeq: keep}
	return Change{Path: dir.path, Type: ChangeLockDelay, Index: index}, true
}

// endLockDelay ends the delay that the release at c.Since began, on the
// directory or kept for it since it was deleted; an end naming an earlier
// release (the delay restarted since) does nothing.
func (s *State) endLockDelay(index uint64, c *Command) (Result, []Change) {
	if d, kept := s.lockDelays[c.Path]; kept {
		if d.index != c.Since {
			return Result{}, nil
		}
		s.dropKept(c.Path)
		return Result{}, []Change{{Path: c.Path, Type: ChangeLockDelayEnded, Index: index}}
	}
	dir, ok := s.nodes[c.Path]
	if !ok || dir.delay == nil || dir.delay.index != c.Since {
		return Result{}, nil
	}
	s.touch(dir)
	dir.delay = nil
	r := dir.rareOf()
	r.delayEnded = index
	dir.setRare(r)
	changes := []Change{{Path: dir.path, Type: ChangeLockDelayEnded, Index: index}}
	return Result{}, append(changes, s.dropEmptyContainers(index, dir)...) // container.go: one emptied in its delay goes now
}

// checkKeepDelay refuses, before anything changes, the delete of a
// directory in lock-delay once the table of deleted directories' delays
// is full (those a staged copy brings count: the table takes them when
// it is served), or holds as many of its tenant's as one tenant may keep.
func (s *State) checkKeepDelay(n *node) *api.Error {
	if n.delay == nil {
		return nil
	}
	if have := len(s.lockDelays) + s.incomingKept(); have >= s.limits.deletedDelays {
		return api.Errorf(api.CodeLimitExceeded, "%s is in lock-delay and the cell keeps the delays of %d deleted lock directories, limit %d (MaxDeletedLockDelays): delete it once its delay ends",
			n.path, have, s.limits.deletedDelays)
	}
	if have := s.keptBy[n.tenant]; n.tenant != "" && have >= s.limits.deletedDelaysPerTenant && !mutant.On(mutant.KeptFair) {
		return api.Errorf(api.CodeLimitExceeded, "%s is in lock-delay and the cell keeps the delays of %d deleted lock directories of tenant %s, limit %d (MaxDeletedLockDelaysPerTenant): delete it once its delay ends",
			n.path, have, n.tenant, s.limits.deletedDelaysPerTenant)
	}
	return nil
}

// putKept keeps d for the deleted directory at path, in place of any
// delay kept there, and counts it for its tenant.
func (s *State) putKept(path string, d *lockDelay) {
	s.dropKept(path)
	if s.lockDelays == nil {
		s.lockDelays = map[string]*lockDelay{}
	}
	s.lockDelays[path] = d
	if d.tenant != "" {
		if s.keptBy == nil {
			s.keptBy = map[string]int{}
		}
		s.keptBy[d.tenant]++
	}
}

// dropKept forgets the delay kept for path, if any.
func (s *State) dropKept(path string) {
	d, ok := s.lockDelays[path]
	if !ok {
		return
	}
	delete(s.lockDelays, path)
	if d.tenant == "" {
		return
	}
	if s.keptBy[d.tenant]--; s.keptBy[d.tenant] == 0 {
		delete(s.keptBy, d.tenant)
	}
}

// keepDelay keeps the delay of a lock directory just removed, with its
// sequence counter, until the leader ends it. removeNode calls it for
// every node it removes, whichever command removes it: a delete (which
// checked the bound first: checkKeepDelay), a session's end, a seal, a
// drop or a restore (these remove no lock directory in delay but one of
// a whole prefix, whose kept delays they then drop: dropKeptUnder).
func (s *State) keepDelay(n *node) {
	if n.delay == nil || mutant.On(mutant.DirDelay) || n.ephemeral && mutant.On(mutant.EphDelay) {
		return
	}
	d := *n.delay // a delay is replaced, never changed in place: copy
	d.nextSeq, d.tenant = n.nextSeq, n.tenant
	s.putKept(n.path, &d)
}

// takeDelay gives a node new at its path the delay kept for a directory
// deleted there, and the directory's sequence counter, if the node can
// be a lock directory: a persistent one. An ephemeral node (it has no
// children) leaves both kept while it is there.
func (s *State) takeDelay(n *node) {
	d, ok := s.lockDelays[n.path]
	if !ok || n.ephemeral && !mutant.On(mutant.EphDelay) {
		return
	}
	s.dropKept(n.path)
	n.nextSeq = max(n.nextSeq, d.nextSeq)
	n.delay = &lockDelay{index: d.index, ms: d.ms, atMS: d.atMS, keepSeq: d.keepSeq}
}

// seqFloor is where sequential children of dir, a directory not there
// (make_parents makes it), start: the counter kept with its delay, or 0.
func (s *State) seqFloor(dir string) uint64 {
	if d, ok := s.lockDelays[dir]; ok {
		return d.nextSeq
	}
	return 0
}

// LockDelay is a lock directory in lock-delay.
type LockDelay struct {
	Dir string
	// Since is the index of the release that began it, MS its length
	// from there and AtMS the proposer's wall clock at the release.
	Since uint64
	MS    int64
	AtMS  int64
}

// LockDelays lists the lock directories in lock-delay, by path, deleted
// ones included: a new leader times each one's end.
func (s *State) LockDelays() []LockDelay {
	var out []LockDelay
	for _, n := range s.nodes {
		if n.delay != nil {
			out = append(out, n.delay.info(n.path))
		}
	}
	for dir, d := range s.lockDelays {
		out = append(out, d.info(dir))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out
}

// Info is the delay as the API shows it.
func (d LockDelay) Info() *api.LockDelayInfo {
	i := &api.LockDelayInfo{Since: d.Since, MS: d.MS, ReleasedAtMS: d.AtMS}
	if d.AtMS > 0 {
		i.UntilMS = d.AtMS + d.MS
	}
	return i
}

// LockDelayOf is the lock-delay of the directory dir, if it is in one
// (whether or not the directory is there).
func (s *State) LockDelayOf(dir string) (LockDelay, bool) {
	if n, ok := s.nodes[dir]; ok && n.delay != nil {
		return n.delay.info(dir), true
	}
	if d, ok := s.lockDelays[dir]; ok {
		return d.info(dir), true
	}
	return LockDelay{}, false
}

func (d *lockDelay) info(dir string) LockDelay {
	return LockDelay{Dir: dir, Since: d.index, MS: d.ms, AtMS: d.atMS}
}

// checkDelayRange checks one delay's fields against the state.
func (s *State) checkDelayRange(dir string, d *lockDelay, nextSeq uint64) error {
	if d.ms <= 0 || d.ms > api.MaxMovedLockDelay.Milliseconds() || d.index > s.index || d.keepSeq >= max(nextSeq, 1) {
		return fmt.Errorf("lock-delay of %s is out of range: %+v", dir, *d)
	}
	return nil
}

// checkLockDelays verifies the table of deleted directories' delays: within
// its bound, each on a valid path where no persistent node is (one made
// there took its delay; an ephemeral one takes none) and in range.
func (s *State) checkLockDelays() error {
	if len(s.lockDelays) > api.MaxDeletedLockDelays {
		return fmt.Errorf("%d deleted lock directories' delays kept, limit %d", len(s.lockDelays), api.MaxDeletedLockDelays)
	}
	by := map[string]int{}
	for _, d := range s.lockDelays {
		if d.tenant != "" {
			by[d.tenant]++
		}
	}
	if !maps.Equal(by, s.keptBy) {
		return fmt.Errorf("kept lock-delays counted by tenant %v, the table holds %v", s.keptBy, by)
	}
	if err := s.checkMovedKept(); err != nil {
		return err
	}
	for dir, d := range s.lockDelays {
		if err := api.ValidatePath(dir); err != nil || dir == "/" {
			return fmt.Errorf("kept lock-delay on path %q: %v", dir, err)
		}
		if n, ok := s.nodes[dir]; ok && !n.ephemeral {
			return fmt.Errorf("lock-delay of %s kept as deleted, but the node is there", dir)
		}
		if err := s.checkDelayRange(dir, d, d.nextSeq); err != nil {
			return err
		}
	}
	return nil
}

// snapKeptDelay is a deleted lock directory's delay in a snapshot's
// header (absent in snapshots from before it existed: none kept).
type snapKeptDelay struct {
	Dir string `json:"p"`
	snapDelay
	NextSeq uint64 `json:"ns,omitempty"`
	Tenant  string `json:"t,omitempty"`
}

// keptDelays lists the deleted directories' delays in path order.
func (s *State) keptDelays() []snapKeptDelay {
	out := make([]snapKeptDelay, 0, len(s.lockDelays))
	for dir, d := range s.lockDelays {
		out = append(out, snapKeptDelay{Dir: dir, snapDelay: snapDelay{Index: d.index, MS: d.ms, AtMS: d.atMS, KeepSeq: d.keepSeq}, NextSeq: d.nextSeq, Tenant: d.tenant})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out
}

// readKeptDelays restores the deleted directories' delays of a snapshot
// (before its nodes: CheckInvariants then finds any clash).
func (s *State) readKeptDelays(kept []snapKeptDelay) error {
	if len(kept) > api.MaxDeletedLockDelays {
		return fmt.Errorf("snapshot keeps %d deleted lock directories' delays, limit %d", len(kept), api.MaxDeletedLockDelays)
	}
	for _, k := range kept {
		if err := api.ValidatePath(k.Dir); err != nil {
			return fmt.Errorf("snapshot kept lock-delay: %w", err)
		}
		if _, dup := s.lockDelays[k.Dir]; dup {
			return fmt.Errorf("snapshot keeps the lock-delay of %s twice", k.Dir)
		}
		if len(k.Tenant) > api.MaxTenantName {
			return fmt.Errorf("snapshot kept lock-delay of %s names a tenant of %d bytes", k.Dir, len(k.Tenant))
		}
		s.putKept(k.Dir, &lockDelay{index: k.Index, ms: k.MS, atMS: k.AtMS, keepSeq: k.KeepSeq, nextSeq: k.NextSeq, tenant: k.Tenant})
	}
	return nil
}
