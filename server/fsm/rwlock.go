package fsm

// Read-write locks: a writer's downgrade, the upgradable read and its
// upgrade (set_lock_mode). A lock directory's queue holds exclusive,
// shared and upgradable nodes in sequence order. An exclusive node waits
// for the nearest lower lock node; a shared or upgradable one for the
// nearest lower exclusive one (blocks). So an upgradable node holds as a
// shared one does; at most one exists per directory (a second's create,
// or a downgrade to one, is refused upgradable_taken: the client waits
// for the first to go and tries again). Refusing the second, rather than
// queueing it, keeps every wait pointing to a lower node but for the
// upgrade's own, below, so no cycle can form.
//
// Downgrade. The holding exclusive node becomes shared (or upgradable)
// in place: same node, same token, same place. The shared nodes behind
// it up to the next exclusive one waited for it and now hold; the entry
// reports ChangeData on it, which fires exactly their predecessor
// watches (and the holder's own watch, which re-arms). An exclusive
// waiter right behind it (no reader between) is woken too, re-lists and
// finds it still waits: nobody else is granted.
//
// Upgrade. The upgradable node becomes exclusive at once. Every shared
// node that holds at the upgrade keeps holding until it leaves: those
// ahead of it wait for no exclusive node below them, and those behind it
// that held (a run of the queue right behind it; upgradeKeep is the last
// one's sequence number) are let through by blocks. Lock nodes created
// later queue behind it (their sequence numbers pass upgradeKeep), so
// new readers cannot starve it. It waits for the nearest lower node, then
// the first one it let hold behind it (upgradeWaitFor): every one of
// those holds and waits for nothing, so the upgrade cannot deadlock. A
// node that holds never stops holding because another node changed mode
// (the tests check it after every apply: checkStillHeld).
//
// Tokens. A downgrade and an upgrade keep the node's token, its create
// index, so writers' tokens rise in the order writers are granted: the
// write grants follow the queue, which is in create order, and an
// upgrade moves no node in it. (A new token for the upgrade, its entry's
// index, would be above the writers queued behind the upgradable node,
// which are granted after it with lower create indexes: a resource that
// fences on the highest token seen would then refuse the next writer;
// TestUpgradeTokenOrder, mutant RWUpgradeNewToken.) The cost: readers
// created after the upgradable node, which the upgrade lets hold until
// they leave, carry higher tokens than the upgraded writer. They are
// gone before it is granted, and readers do not write to a fenced
// resource (docs/design/recipes.md). While the upgrade waits for them
// the node holds nothing, so CheckToken refuses its token until the
// write grant; it counts the readers the upgrade lets hold (holding).
// An upgraded node never holds through a lock-delay that started before
// its grant (waitOn): its grant is a new one. tokenIndex stays for
// snapshots written by the mutant build only (always 0 otherwise).

import (
	"fmt"
	"sort"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// OpSetLockMode changes the lock node Path's mode to Lock, for the
// node's own session (Session): a downgrade (exclusive that holds to
// shared or upgradable) or an upgrade (upgradable to exclusive), or an
// upgradable node giving up its upgrade (to shared). Deduplicated as a
// write. Codec V2.
const OpSetLockMode Op = "set_lock_mode"

// maxCheckedQueue bounds the lock queues checkRWLocks checks for
// exclusion (each check is quadratic in the queue).
const maxCheckedQueue = 256

// tokenIndex is the index n's token carries: its last upgrade's, or its
// create index.
func tokenIndex(n *node) uint64 {
	if n.rare != nil && n.rare.tokenIndex != 0 {
		return n.rare.tokenIndex
	}
	return n.createIndex
}

// upgraded reports whether n is an exclusive node that an upgrade made.
func upgraded(n *node) bool {
	return n.lock == api.LockExclusive && n.rare != nil && n.rare.upgradedAt != 0
}

// blocks reports whether the lock node k, lower in the queue, keeps n
// from holding: any lower node keeps an exclusive one; an exclusive
// node keeps a shared or upgradable one, unless k's upgrade let n hold on.
func blocks(k, n *node) bool {
	if n.lock == api.LockExclusive {
		return true
	}
	return k.lock == api.LockExclusive && !letsHold(k, n)
}

// letsHold reports whether k is an upgraded node and n one of the shared
// nodes that held behind it at the upgrade.
func letsHold(k, n *node) bool {
	if !upgraded(k) {
		return false
	}
	return n.seq <= k.rare.upgradeKeep || mutant.On(mutant.RWUpgradeKeepsAll)
}

// upgradeWaitFor is what the upgraded node n (at kids[i]) waits for once
// no lower node is left: the first of the nodes it let hold behind it.
func upgradeWaitFor(n *node, kids []*node, i int) *node {
	if !upgraded(n) || i+1 >= len(kids) {
		return nil
	}
	if k := kids[i+1]; k.seq <= n.rare.upgradeKeep {
		return k
	}
	return nil
}

// holding reports whether lock node k holds, and whether a later node of
// its queue may (the holders are a prefix of the queue, but for the
// nodes an upgraded node waiting for them lets hold behind it).
func holding(k *node) (held, more bool) {
	if waitOn(k) == nil {
		return true, true
	}
	return false, upgraded(k) && k.rare.upgradeKeep > k.seq
}

// checkUpgradableCreate refuses an upgradable node's create where one
// exists in the directory.
func checkUpgradableCreate(c *Command, parent *node) *api.Error {
	if c.Lock != api.LockUpgradable || parent == nil {
		return nil
	}
	return checkOneUpgradable(parent, nil)
}

// checkOneUpgradable refuses a second upgradable node in dir (self, a
// node becoming one, not counted).
func checkOneUpgradable(dir, self *node) *api.Error {
	if mutant.On(mutant.RWSecondUpgradable) {
		return nil
	}
	for _, k := range dir.lockKids {
		if k.lock == api.LockUpgradable && k != self {
			return api.Errorf(api.CodeUpgradableTaken, "%s has an upgradable lock node, %s: one at a time (wait for its deletion)", dir.path, k.path)
		}
	}
	return nil
}

// setLockMode applies set_lock_mode: checkSetLockMode, then the upgrade
// or downgrade. The result carries the node, its token and what it waits
// for (an upgrade waits for the other holders).
func (s *State) setLockMode(index uint64, c *Command) (Result, []Change) {
	n, err := s.checkSetLockMode(index, c)
	if err != nil {
		return Result{Err: err}, nil
	}
	var changes []Change
	if c.Lock == api.LockExclusive {
		s.upgrade(index, n)
	} else {
		changes = s.downgrade(index, n, c.Lock)
	}
	res := Result{Node: s.meta(n, false), Token: s.token(n)}
	if w := waitOn(n); w != nil {
		res.WaitFor = w.path
	}
	return res, changes
}

// checkSetLockMode finds the command's lock node and checks that its
// session owns it and that the change is one of those allowed.
func (s *State) checkSetLockMode(index uint64, c *Command) (*node, *api.Error) {
	if err := s.checkNodePath(c.Path); err != nil {
		return nil, err
	}
	n, ok := s.nodes[c.Path]
	if !ok || n.lock == api.LockNone {
		return nil, api.Errorf(api.CodeNoNode, "%s is not a lock node", c.Path)
	}
	if c.Session == 0 {
		return nil, api.Errorf(api.CodeNoSession, "a lock mode change names the lock node's session")
	}
	if n.owner != c.Session && !mutant.On(mutant.RWModeAnySession) {
		return nil, api.Errorf(api.CodeForbidden, "%s is a lock node of session %d: only that session changes its mode", n.path, n.owner)
	}
	switch {
	case n.lock == api.LockExclusive && (c.Lock == api.LockShared || c.Lock == api.LockUpgradable):
		if waitOn(n) != nil && !mutant.On(mutant.RWDowngradeUnheld) {
			return nil, api.Errorf(api.CodeConflict, "%s does not hold its lock: only a holding writer downgrades", n.path)
		}
		if c.Lock == api.LockUpgradable {
			return n, checkOneUpgradable(n.parent, n)
		}
		return n, nil
	case n.lock == api.LockUpgradable && c.Lock == api.LockExclusive:
		return n, s.checkTokenSpace(index, n.path)
	case n.lock == api.LockUpgradable && c.Lock == api.LockShared:
		return n, nil
	}
	return nil, api.Errorf(api.CodeBadRequest, "%s is a %s lock node: it cannot become %q (a holding exclusive node downgrades to shared or upgradable; an upgradable one upgrades to exclusive or gives up to shared)", n.path, n.lock, c.Lock)
}

// upgrade makes the upgradable node n exclusive, keeping its token; the
// shared nodes that hold behind it keep holding (upgradeKeep).
func (s *State) upgrade(index uint64, n *node) {
	var keep uint64
	kids := n.parent.lockKids
	i := sort.Search(len(kids), func(i int) bool { return kids[i].seq >= n.seq })
	for j := i + 1; j < len(kids); j++ {
		if waitOn(kids[j]) != nil {
			break // the holders behind it are a run right behind it
		}
		keep = kids[j].seq
	}
	s.touch(n)
	n.lock = api.LockExclusive
	r := n.rareOf()
	r.upgradedAt, r.upgradeKeep = index, keep
	if mutant.On(mutant.RWUpgradeNewToken) {
		n.tokenEpoch = max(n.tokenEpoch, s.nodes[api.Prefix(n.path)].dirEpoch)
		r.tokenIndex = index
	}
	n.setRare(r)
}

// downgrade makes n, a holding exclusive node (or an upgradable one),
// mode; from an exclusive one it reports ChangeData on n, which wakes
// the readers that waited for it.
func (s *State) downgrade(index uint64, n *node, mode api.LockMode) []Change {
	s.touch(n)
	wasExclusive := n.lock == api.LockExclusive
	n.lock = mode
	r := n.rareOf()
	r.upgradedAt, r.upgradeKeep = 0, 0 // the token (tokenIndex) stays
	n.setRare(r)
	if !wasExclusive {
		return nil // an upgradable node giving up: nobody's hold changes
	}
	return []Change{{Path: n.path, Type: ChangeData, Index: index}}
}

// checkRWLocks verifies the read-write rules: at most one upgradable
// node per directory, the mode-change fields only where they belong,
// and, in each queue of at most maxCheckedQueue nodes, an exclusive
// holder holds alone.
func (s *State) checkRWLocks() error {
	for _, n := range s.nodes {
		if r := n.rare; r != nil && (r.upgradedAt != 0 && n.lock != api.LockExclusive || r.upgradeKeep != 0 && r.upgradedAt == 0 ||
			r.tokenIndex != 0 && (r.tokenIndex < n.createIndex || r.tokenIndex > s.index)) {
			return fmt.Errorf("lock node %s (%s) has mode-change fields %+v", n.path, n.lock, *r)
		}
		if len(n.lockKids) == 0 {
			continue
		}
		if ups := countMode(n, api.LockUpgradable); ups > 1 && !mutant.On(mutant.RWSecondUpgradable) {
			return fmt.Errorf("%s has %d upgradable lock nodes", n.path, ups)
		}
		if err := checkExclusion(n); err != nil {
			return err
		}
	}
	return nil
}

// countMode counts dir's lock nodes of mode.
func countMode(dir *node, mode api.LockMode) int {
	count := 0
	for _, k := range dir.lockKids {
		if k.lock == mode {
			count++
		}
	}
	return count
}

// checkExclusion verifies that an exclusive node holding dir's lock is
// its only holder.
func checkExclusion(dir *node) error {
	if len(dir.lockKids) > maxCheckedQueue {
		return nil
	}
	holders, writer := 0, ""
	for _, k := range dir.lockKids {
		if waitOn(k) != nil {
			continue
		}
		holders++
		if k.lock == api.LockExclusive {
			writer = k.path
		}
	}
	if writer != "" && holders > 1 {
		return fmt.Errorf("%s: exclusive %s holds with %d other holders", dir.path, writer, holders-1)
	}
	return nil
}

// maxHeldCheckNodes bounds the states heldLockNodes lists (nil past it).
const maxHeldCheckNodes = 4096

// heldLockNodes is every lock node that holds now (tests compare it
// before and after an apply: checkStillHeld); nil in a state of more
// than maxHeldCheckNodes nodes.
func (s *State) heldLockNodes() map[*node]bool {
	if len(s.nodes) > maxHeldCheckNodes {
		return nil
	}
	held := map[*node]bool{}
	for _, n := range s.nodes {
		if n.lock != api.LockNone && waitOn(n) == nil {
			held[n] = true
		}
	}
	return held
}

// checkStillHeld verifies that every node of before (heldLockNodes) that
// is still there holds, unless this entry upgraded it (its own change).
func (s *State) checkStillHeld(before map[*node]bool) error {
	for n := range before {
		if s.nodes[n.path] != n || waitOn(n) == nil {
			continue
		}
		if n.rare != nil && n.rare.upgradedAt == s.index {
			continue
		}
		return fmt.Errorf("lock node %s held before entry %d and no longer holds", n.path, s.index)
	}
	return nil
}
