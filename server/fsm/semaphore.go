package fsm

// Semaphores. A semaphore is a lock directory whose lock nodes are
// permits (api.LockPermit): ephemeral sequential nodes, each naming the
// semaphore's N. A permit node holds iff fewer than N permit nodes
// precede it in the queue (sorted by sequence number), so at most N hold
// at once and they are granted in queue order. Each permit's fencing
// token is its create index under the prefix's directory epoch, as a
// mutex's: tokens rise per semaphore, in grant order. Lock-delay and
// CheckToken work on permits as on any lock node: an unclean release of a
// holding permit with a lock-delay holds back every permit that did not
// hold at the release until the delay ends (the freed permit, and any
// other freed meanwhile, is granted only then).
//
// Permit nodes never share a directory with exclusive or shared lock
// nodes, and every permit of a directory names the same N: a create that
// disagrees is refused permits_mismatch and changes nothing. N is the
// permits present; a directory with none takes the N of its next permit.
//
// No herd. A permit that waits waits for its own grant: its WaitFor is
// itself, so the watch its create (or a re-list) arms is a data watch on
// its own node. When a holding permit leaves the queue (released,
// expired, deleted), exactly one node can have moved into the first N:
// the one that was N-th behind the queue's head (permitHeir). The same
// entry marks that node changed (its modify index, not its version,
// moves to the entry's index) and reports ChangeData on it, which fires
// its watch: one release wakes one waiter, the one that can now take the
// freed permit. A waiter leaving, or a new one joining, moves nobody into
// the first N and wakes nobody. A woken permit blocked by a lock-delay
// re-lists and then waits on the directory as a mutex's waiter does.

import (
	"fmt"
	"sort"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// permitRank is how many lock nodes precede the permit node n in its
// directory's queue.
func permitRank(n *node) int {
	kids := n.parent.lockKids
	return sort.Search(len(kids), func(i int) bool { return kids[i].seq >= n.seq })
}

// permitBound is the rank below which a permit node of n's semaphore
// holds: its N.
func permitBound(n *node) int {
	b := int(n.permits)
	if mutant.On(mutant.PermitOffByOne) {
		b++ // a permit holds with N ahead of it: N+1 holders
	}
	return b
}

// permitWaitFor is waitFor for a permit node: nil if it holds (fewer
// than N permits precede it), else n itself (it waits for its own grant,
// which permitHeir and wakePermit signal on its node).
func permitWaitFor(n *node) *node {
	if permitRank(n) < permitBound(n) {
		return nil
	}
	return n
}

// permitHeir is, for a lock node n about to leave its queue, the permit
// node that its leaving moves into the first N (nil if none: n is no
// permit, does not hold, or no permit waits).
func permitHeir(n *node) *node {
	if n.lock != api.LockPermit || n.parent == nil {
		return nil
	}
	b := permitBound(n)
	if permitRank(n) >= b || b >= len(n.parent.lockKids) {
		return nil
	}
	return n.parent.lockKids[b]
}

// wakePermit marks heir granted by the entry at index: its modify index
// moves there (a watch re-armed with an older index fires too) and a
// data change on it wakes its waiter (nil: nothing).
func (s *State) wakePermit(index uint64, heir *node) []Change {
	if heir == nil {
		return nil
	}
	s.touch(heir)
	heir.modifyIndex = index
	s.noteChange(index, api.ChangePut, heir) // changes.go: its modify index moved
	return []Change{{Path: heir.path, Type: ChangeData, Index: index}}
}

// checkPermits refuses a lock create that does not fit the lock nodes
// already under parent (nil: a directory make_parents adds, empty): a
// permit's N out of range or unlike the permits present, or a permit
// beside non-permit lock nodes or the reverse.
func checkPermits(c *Command, parent *node) *api.Error {
	if c.Lock != api.LockPermit && c.Permits != 0 {
		return api.Errorf(api.CodeBadRequest, "permits is for permit lock nodes (lock %q) only", api.LockPermit)
	}
	if c.Lock == api.LockPermit && (c.Permits < 1 || c.Permits > api.MaxPermits) {
		return api.Errorf(api.CodeBadRequest, "a semaphore has 1 to %d permits (MaxPermits), not %d", api.MaxPermits, c.Permits)
	}
	if c.Lock == api.LockNone || parent == nil || len(parent.lockKids) == 0 || mutant.On(mutant.PermitsMixed) {
		return nil
	}
	k := parent.lockKids[0] // every lock node of parent is of its kind and N
	switch {
	case k.lock == api.LockPermit && c.Lock != api.LockPermit:
		return api.Errorf(api.CodePermitsMismatch, "%s is a semaphore of %d permits: a lock node of mode %s cannot join it", parent.path, k.permits, c.Lock)
	case k.lock != api.LockPermit && c.Lock == api.LockPermit:
		return api.Errorf(api.CodePermitsMismatch, "%s holds %s lock nodes: a semaphore's permit cannot join them", parent.path, k.lock)
	case c.Lock == api.LockPermit && int64(k.permits) != c.Permits:
		return api.Errorf(api.CodePermitsMismatch, "%s is a semaphore of %d permits, not %d: every client of a semaphore must name the same N", parent.path, k.permits, c.Permits)
	}
	return nil
}

// checkPermitKids verifies n's lock nodes: permits only with permits, all
// of one N within range (invariants.go).
func checkPermitKids(n *node) error {
	if len(n.lockKids) == 0 {
		return nil
	}
	first := n.lockKids[0]
	for _, k := range n.lockKids {
		if (k.lock == api.LockPermit) != (first.lock == api.LockPermit) {
			return fmt.Errorf("%s mixes permit and %s lock nodes", n.path, k.lock)
		}
		if k.permits != first.permits || (k.lock == api.LockPermit) != (k.permits > 0) || k.permits > api.MaxPermits {
			return fmt.Errorf("%s has lock node %s of %d permits, first %d", n.path, k.path, k.permits, first.permits)
		}
	}
	return nil
}

// SemaphoreOf reports, for the lock directory dir, whether it is a
// semaphore (its lock nodes are permits), its N and how many permits
// hold now.
func (s *State) SemaphoreOf(dir string) (permits, inUse int, ok bool) {
	n, exists := s.nodes[dir]
	if !exists || len(n.lockKids) == 0 || n.lockKids[0].lock != api.LockPermit {
		return 0, 0, false
	}
	for _, k := range n.lockKids {
		if waitOn(k) != nil {
			break // the holders are a prefix of the queue
		}
		inUse++
	}
	return int(n.lockKids[0].permits), inUse, true
}
