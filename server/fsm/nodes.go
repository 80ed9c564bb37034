package fsm

import (
	"fmt"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// seqDigits is the width of a sequential node's counter suffix.
const seqDigits = 10

const maxSeq = 9_999_999_999

// node is one node of the namespace. Its layout is kept compact (224
// bytes, a size class; footprint_test.go measures it): a leaf holds no
// child index, and the fields only a sealed prefix root or a lock
// directory past a lock-delay use hang off rare.
type node struct {
	path   string
	parent *node
	// value is the node's value: a string, immutable, so the state holds
	// one copy without a capacity word (valueBytes copies it out).
	value       string
	version     uint64
	createIndex uint64
	modifyIndex uint64
	childIndex  uint64 // last child create/delete; starts at createIndex
	owner       uint64
	seq         uint64 // sequence number of a sequential node
	nextSeq     uint64 // counter for this node's sequential children
	dirEpoch    uint64 // directory epoch, on prefix roots only
	tokenEpoch  uint64 // directory epoch of a lock node's token
	// prefixState, on prefix roots only: "" (served here), sealed (moved
	// to movedTo(): every write and read under it is refused with
	// moved), staging or staged (a migration is copying it here; not
	// served yet).
	prefixState string
	rare        *nodeRare // nil on most nodes
	tenant      string    // the tenant that created it, whose quota it counts against ("": none)
	lock        api.LockMode
	// kids are its children in path order; nil while it has none
	// (children.go).
	kids *kidList
	// lockKids are the children that are lock nodes, in sequence order
	// (appended in creation order, which is sequence order).
	lockKids []*node
	// delay, on a lock directory in lock-delay: nil otherwise.
	delay *lockDelay
	// move is its part in a prefix move (prefixmove.go), nil if none.
	move *moveState
	// lockDelayMS, on a lock node: the lock-delay its unclean release
	// starts on its directory (at most api.MaxLockDelay: an int32 of ms).
	lockDelayMS int32
	ephemeral   bool
	container   bool // a lock recipe's directory, deleted with its last child (container.go)
	// permits, on a permit lock node: its semaphore's N (semaphore.go),
	// at most api.MaxPermits.
	permits uint16
}

// nodeRare are the fields few nodes use: where a sealed prefix root
// moved (the cell, and the directory index of the migration that sealed
// it), and on a lock directory the index of the end_lock_delay that last
// ended its delay (a re-armed watch that missed it fires).
type nodeRare struct {
	movedTo      string
	sealDirIndex uint64
	delayEnded   uint64
	// On a lock node whose mode changed (rwlock.go): tokenIndex, the
	// index its token carries from its last upgrade on (0: its create
	// index); upgradedAt, the index of the upgrade that made it the
	// exclusive node it is (0: not upgraded); upgradeKeep, the last
	// sequence number of the shared nodes behind it that held at that
	// upgrade and hold on until they leave.
	tokenIndex  uint64
	upgradedAt  uint64
	upgradeKeep uint64
}

// movedTo is the cell a sealed prefix root moved to ("" if not sealed).
func (n *node) movedTo() string {
	if n.rare == nil {
		return ""
	}
	return n.rare.movedTo
}

// sealDirIndex is the directory index of the migration that sealed the
// prefix root (0 if not sealed).
func (n *node) sealDirIndex() uint64 {
	if n.rare == nil {
		return 0
	}
	return n.rare.sealDirIndex
}

// delayEnded is the index of the end_lock_delay that last ended the lock
// directory's delay (0: none).
func (n *node) delayEnded() uint64 {
	if n.rare == nil {
		return 0
	}
	return n.rare.delayEnded
}

// setRare sets the rare fields, dropping them when all are zero.
func (n *node) setRare(r nodeRare) {
	if r == (nodeRare{}) {
		n.rare = nil
		return
	}
	n.rare = &r
}

// rareOf is n's rare fields (zero if none), to change and setRare.
func (n *node) rareOf() nodeRare {
	if n.rare == nil {
		return nodeRare{}
	}
	return *n.rare
}

func checkValue(v []byte) *api.Error {
	if len(v) > api.MaxValueSize {
		return api.Errorf(api.CodeValueTooLarge, "value is %d bytes, limit %d", len(v), api.MaxValueSize)
	}
	return nil
}

func asAPIError(err error) *api.Error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*api.Error); ok {
		return e
	}
	return api.Errorf(api.CodeInternal, "%v", err)
}

// checkNodePath validates a client path: well formed, below a prefix root
// this cell holds.
func (s *State) checkNodePath(p string) *api.Error {
	if err := api.ValidatePath(p); err != nil {
		return asAPIError(err)
	}
	if api.Parent(p) == "/" {
		return api.Errorf(api.CodeInvalidPath, "%s is a prefix root, managed by the cell", p)
	}
	return s.CheckServes(p)
}

// createPlan is a create that passed every check: what applyCreate needs.
type createPlan struct {
	path       string // final path (with the sequence suffix)
	parentPath string
	parent     *node    // nil: make_parents creates parentPath
	seq        uint64   // sequence number, for a sequential create
	sess       *session // owner, for an ephemeral create
	// parentNodes and parentBytes are the ancestors make_parents adds.
	parentNodes int
	parentBytes int64
}

// create is checkCreate, then applyCreate: a refused create changes nothing.
func (s *State) create(index uint64, c *Command) (Result, []Change) {
	p, err := s.checkCreate(index, c)
	if err != nil {
		return Result{Err: err}, nil
	}
	return s.applyCreate(index, c, p)
}

// checkCreate validates a create against the state without changing it:
// the command's own fields, then its session, parent, final path and
// limits, in that order (the first refusal wins).
func (s *State) checkCreate(index uint64, c *Command) (createPlan, *api.Error) {
	var p createPlan
	if err := s.checkCreateFields(c); err != nil {
		return p, err
	}
	if err := s.checkCreateLock(index, c); err != nil {
		return p, err
	}
	if err := s.planCreateSession(c, &p); err != nil {
		return p, err
	}
	if err := s.planCreateParent(c, &p); err != nil {
		return p, err
	}
	if err := checkPermits(c, p.parent); err != nil {
		return p, err
	}
	if err := checkUpgradableCreate(c, p.parent); err != nil { // rwlock.go
		return p, err
	}
	if err := s.planCreatePath(c, &p); err != nil {
		return p, err
	}
	if err := s.checkCreateLimits(c, p); err != nil {
		return p, err
	}
	return p, nil
}

// checkCreateFields checks the path and value of a create.
func (s *State) checkCreateFields(c *Command) *api.Error {
	if err := s.checkNodePath(c.Path); err != nil {
		return err
	}
	if err := checkValue(c.Value); err != nil {
		return err
	}
	return nil
}

// checkCreateLock checks a create's lock mode and lock-delay, and that a
// lock node is ephemeral, sequential and has token space left.
func (s *State) checkCreateLock(index uint64, c *Command) *api.Error {
	if !c.Lock.Valid() {
		return api.Errorf(api.CodeBadRequest, "unknown lock mode %q", c.Lock)
	}
	if c.LockDelayMS != 0 && c.Lock == api.LockNone {
		return api.Errorf(api.CodeBadRequest, "a lock-delay is for lock nodes only")
	}
	if c.LockDelayMS < 0 || c.LockDelayMS > api.MaxLockDelay.Milliseconds() {
		return api.Errorf(api.CodeBadRequest, "lock-delay %v is outside 0 to %v", time.Duration(c.LockDelayMS)*time.Millisecond, api.MaxLockDelay)
	}
	if c.Lock != api.LockNone {
		if !c.Ephemeral || !c.Sequential {
			return api.Errorf(api.CodeBadRequest, "a lock node must be ephemeral and sequential")
		}
		if err := s.checkTokenSpace(index, c.Path); err != nil {
			return err
		}
	}
	return nil
}

// planCreateSession finds the owning session of an ephemeral create.
func (s *State) planCreateSession(c *Command, p *createPlan) *api.Error {
	if c.Ephemeral {
		if c.Session == 0 {
			return api.Errorf(api.CodeNoSession, "an ephemeral node needs a session")
		}
		var err *api.Error
		if p.sess, err = s.authSession(c); err != nil {
			return err
		}
	}
	return nil
}

// planCreateParent checks the parent of a create: it exists (or
// make_parents creates it), is not ephemeral, and has room for a child.
func (s *State) planCreateParent(c *Command, p *createPlan) *api.Error {
	p.parentPath = api.Parent(c.Path)
	parent, ok := s.nodes[p.parentPath]
	if !ok && !c.MakeParents {
		return api.Errorf(api.CodeNoNode, "parent %s does not exist", p.parentPath)
	}
	if ok && parent.ephemeral {
		return api.Errorf(api.CodeBadRequest, "ephemeral node %s cannot have children", p.parentPath)
	}
	if ok {
		p.parent = parent
	} else if err := s.planMissingParents(c, p); err != nil {
		return err
	}
	if p.parent != nil {
		if err := s.checkChildren(p.parent); err != nil {
			return err
		}
	}
	return nil
}

// planMissingParents checks the ancestors make_parents would create.
func (s *State) planMissingParents(c *Command, p *createPlan) *api.Error {
	// make_parents would create the missing ancestors below the nearest
	// existing one, which must not be ephemeral either. The walk ends at
	// the latest at the prefix root, which checkNodePath found.
	q := api.Parent(p.parentPath)
	for s.nodes[q] == nil {
		q = api.Parent(q)
	}
	if s.nodes[q].ephemeral {
		return api.Errorf(api.CodeBadRequest, "ephemeral node %s cannot have children", q)
	}
	// The missing ancestors count against the limits too, and each
	// must lie within the caller's grant.
	for a := p.parentPath; a != q; a = api.Parent(a) {
		if c.ParentsFrom != "" && !api.Covers(c.ParentsFrom, a) && !mutant.On(mutant.ParentsFrom) {
			return api.Errorf(api.CodeForbidden, "make_parents would create %s, outside the caller's grant on %s", a, c.ParentsFrom)
		}
		p.parentNodes++
		p.parentBytes += int64(len(a))
	}
	if err := s.checkChildren(s.nodes[q]); err != nil {
		return err
	}
	return nil
}

// planCreatePath names the node: the path, with the next free sequence
// suffix for a sequential create; it must not exist.
func (s *State) planCreatePath(c *Command, p *createPlan) *api.Error {
	p.path = c.Path
	if c.Sequential {
		if p.parent != nil {
			p.seq = p.parent.nextSeq
		} else {
			p.seq = max(s.seqFloor(p.parentPath), s.containerSeqStart(c)) // a lock directory deleted in its delay; a container (container.go)
		}
		// Skip names a plain node already took, so one clash cannot block
		// every later sequential create under the parent.
		for {
			if p.seq > maxSeq {
				return api.Errorf(api.CodeBadRequest, "sequence counter of %s is exhausted", p.parentPath)
			}
			p.path = fmt.Sprintf("%s%0*d", c.Path, seqDigits, p.seq)
			if _, taken := s.nodes[p.path]; !taken {
				break
			}
			p.seq++
		}
		if len(p.path) > api.MaxPathLen {
			return api.Errorf(api.CodeInvalidPath, "sequential path is %d bytes, limit %d", len(p.path), api.MaxPathLen)
		}
	}
	if _, exists := s.nodes[p.path]; exists {
		return api.Errorf(api.CodeNodeExists, "%s exists", p.path)
	}
	return checkContainerCreate(c) // container.go
}

// checkCreateLimits checks the cell's growth limits and the tenant's
// quota for the node and the ancestors make_parents adds.
func (s *State) checkCreateLimits(c *Command, p createPlan) *api.Error {
	if err := s.checkGrowth(1+p.parentNodes, int64(len(p.path)+len(c.Value))+p.parentBytes); err != nil {
		return err
	}
	if err := s.checkQuota(c, 0, 1+p.parentNodes, int64(len(p.path)+len(c.Value))+p.parentBytes); err != nil {
		return err
	}
	return nil
}

// applyCreate applies a checked create in full.
func (s *State) applyCreate(index uint64, c *Command, p createPlan) (Result, []Change) {
	var changes []Change
	parent := p.parent
	if parent == nil {
		parent, changes = s.makeParents(index, p.parentPath, c.Tenant)
		s.markContainers(c, changes) // container.go
	}
	n := &node{
		path: p.path, parent: parent, value: string(c.Value), version: 1,
		createIndex: index, modifyIndex: index, childIndex: index,
		ephemeral: c.Ephemeral, lock: c.Lock, tenant: c.Tenant,
		lockDelayMS: int32(c.LockDelayMS), // checkCreateLock: at most api.MaxLockDelay
		permits:     uint16(c.Permits),    // checkPermits: at most api.MaxPermits
	}
	if c.Sequential {
		n.seq = p.seq
		s.touch(parent)
		parent.nextSeq = p.seq + 1
	}
	if n.lock != api.LockNone {
		// The token's epoch is fixed at grant: a later epoch raise does not
		// change a holder's token.
		n.tokenEpoch = s.nodes[api.Prefix(p.path)].dirEpoch
		if mutant.On(mutant.MoveKeepsEpoch) {
			n.tokenEpoch = 1
		}
	}
	if p.sess != nil {
		n.owner = p.sess.id
		p.sess.addEphemeral(p.path)
	}
	s.link(index, n)
	changes = append(changes, Change{Path: p.path, Type: ChangeCreated, Index: index}, Change{Path: parent.path, Type: ChangeChildren, Index: index})
	s.noteCreated(index, changes) // changes.go: the parents made, then n
	res := Result{Node: s.meta(n, false)}
	if n.lock != api.LockNone {
		res.Token = s.token(n)
		if w := waitOn(n); w != nil {
			res.WaitFor = w.path
		}
	}
	return res, changes
}

// checkTokenSpace refuses a lock node whose fencing token would not
// compare above every earlier one: its create index past the token's index
// bits (it would wrap), or its prefix's directory epoch past MaxTokenEpoch
// (a state from before the limit; the token would be negative as int64).
func (s *State) checkTokenSpace(index uint64, path string) *api.Error {
	if index > api.MaxTokenIndex {
		return api.Errorf(api.CodeTokenExhausted, "lock create at index %d: fencing-token index space ends at %d; move the prefix to a new cell", index, uint64(api.MaxTokenIndex))
	}
	if e := s.nodes[api.Prefix(path)].dirEpoch; e > api.MaxTokenEpoch {
		return api.Errorf(api.CodeTokenExhausted, "directory epoch %d of %s is over the token limit %d", e, api.Prefix(path), uint64(api.MaxTokenEpoch))
	}
	return nil
}

// TokenHeadroom is how many more Raft indices the cell can apply before
// lock creates are refused (token_exhausted).
func (s *State) TokenHeadroom() uint64 {
	if s.index >= api.MaxTokenIndex {
		return 0
	}
	return api.MaxTokenIndex - s.index
}

// makeParents creates the missing persistent ancestors of p (below its
// prefix root, which exists: checkNodePath ensured it) and returns p's node.
func (s *State) makeParents(index uint64, p, tenant string) (*node, []Change) {
	var missing []string
	for q := p; ; q = api.Parent(q) {
		if _, ok := s.nodes[q]; ok {
			break
		}
		missing = append(missing, q)
	}
	var changes []Change
	for i := len(missing) - 1; i >= 0; i-- {
		q := missing[i]
		n := &node{path: q, parent: s.nodes[api.Parent(q)], version: 1, createIndex: index, modifyIndex: index, childIndex: index, tenant: tenant}
		s.link(index, n)
		changes = append(changes, Change{Path: q, Type: ChangeCreated, Index: index}, Change{Path: n.parent.path, Type: ChangeChildren, Index: index})
	}
	return s.nodes[p], changes
}

func (s *State) link(index uint64, n *node) {
	s.takeDelay(n)
	s.nodes[n.path] = n
	s.bytes += nodeBytes(n)
	s.use(n.tenant, 0, 1, nodeBytes(n))
	n.parent.addChild(n)
	s.touch(n.parent)
	n.parent.childIndex = index
	if n.lock != api.LockNone {
		n.parent.lockKids = append(n.parent.lockKids, n)
	}
}

func (s *State) put(index uint64, c *Command) (Result, []Change) {
	if err := s.checkNodePath(c.Path); err != nil {
		return Result{Err: err}, nil
	}
	if err := checkValue(c.Value); err != nil {
		return Result{Err: err}, nil
	}
	n, ok := s.nodes[c.Path]
	if !ok {
		if c.OwnOnly {
			return Result{Err: api.Errorf(api.CodeForbidden, "%s does not exist: creating it needs the write role", c.Path)}, nil
		}
		if c.Version != nil && *c.Version != 0 {
			return Result{Err: api.Errorf(api.CodeNoNode, "%s does not exist", c.Path)}, nil
		}
		create := putCreate(c) // uncontain.go
		return s.create(index, &create)
	}
	if err := mayChange(c, n); err != nil {
		return Result{Err: err}, nil
	}
	if c.Version != nil {
		if *c.Version == 0 {
			return Result{Err: api.Errorf(api.CodeNodeExists, "%s exists", c.Path)}, nil
		}
		if *c.Version != n.version {
			return Result{Err: api.Errorf(api.CodeVersionMismatch, "%s is at version %d, not %d", c.Path, n.version, *c.Version)}, nil
		}
	}
	if err := s.checkGrowth(0, int64(len(c.Value)-len(n.value))); err != nil {
		return Result{Err: err}, nil
	}
	if n.tenant == c.Tenant {
		// A node counts against the tenant that made it; another's write
		// to it (a shared config, granted to both) grows the maker's.
		if err := s.checkQuota(c, 0, 0, int64(len(c.Value)-len(n.value))); err != nil {
			return Result{Err: err}, nil
		}
	}
	s.touch(n)
	s.bytes += int64(len(c.Value) - len(n.value))
	s.use(n.tenant, 0, 0, int64(len(c.Value)-len(n.value)))
	n.value = string(c.Value)
	n.version++
	n.modifyIndex = index
	s.uncontain(index, c, n)              // uncontain.go
	s.noteChange(index, api.ChangePut, n) // changes.go
	return Result{Node: s.meta(n, false)}, []Change{{Path: n.path, Type: ChangeData, Index: index}}
}

// mayChange refuses a write or delete of another session's ephemeral
// node (a lock holder's node, an election candidate), unless from an
// admin. The command's session, if any, was authenticated in ApplyEntry.
func mayChange(c *Command, n *node) *api.Error {
	if c.OwnOnly && (!n.ephemeral || c.Session != n.owner) {
		return api.Errorf(api.CodeForbidden, "%s is not an ephemeral node of session %d: changing it needs the write role", n.path, c.Session)
	}
	if !n.ephemeral || c.Admin || c.Session == n.owner {
		return nil
	}
	return api.Errorf(api.CodeForbidden, "%s is ephemeral node of session %d: only that session or an admin may change it", n.path, n.owner)
}

func (s *State) delete(index uint64, c *Command) (Result, []Change) {
	if err := s.checkNodePath(c.Path); err != nil {
		return Result{Err: err}, nil
	}
	n, ok := s.nodes[c.Path]
	if !ok {
		return Result{Err: api.Errorf(api.CodeNoNode, "%s does not exist", c.Path)}, nil
	}
	if err := mayChange(c, n); err != nil {
		return Result{Err: err}, nil
	}
	if c.Version != nil && *c.Version != n.version {
		return Result{Err: api.Errorf(api.CodeVersionMismatch, "%s is at version %d, not %d", c.Path, n.version, *c.Version)}, nil
	}
	if n.numChildren() > 0 {
		return Result{Err: api.Errorf(api.CodeNotEmpty, "%s has %d children", c.Path, n.numChildren())}, nil
	}
	if err := s.checkKeepDelay(n); err != nil {
		return Result{Err: err}, nil
	}
	meta := s.meta(n, false)
	return Result{Node: meta}, s.removeWithContainers(index, n) // a lock-delay outlives its directory; container.go

}

// removeNode unlinks a childless node. A lock-delay it holds, with its
// sequence counter, outlives it (keepDelay), whatever removes it.
func (s *State) removeNode(index uint64, n *node) []Change {
	heir := permitHeir(n) // while n is still in the queue
	// The change ring (changes.go) records n as it was.
	s.noteChange(index, api.ChangeDelete, n)
	s.keepDelay(n)
	s.foldContainerSeq(n) // container.go
	p := n.parent
	p.removeChild(n)
	delete(s.nodes, n.path)
	s.bytes -= nodeBytes(n)
	s.use(n.tenant, 0, -1, -nodeBytes(n))
	s.touch(p)
	p.childIndex = index
	if n.lock != api.LockNone {
		for i, k := range p.lockKids {
			if k == n {
				p.lockKids = append(p.lockKids[:i:i], p.lockKids[i+1:]...)
				break
			}
		}
	}
	if n.ephemeral {
		if sess, ok := s.sessions[n.owner]; ok {
			sess.dropEphemeral(n.path)
		}
	}
	changes := []Change{{Path: n.path, Type: ChangeDeleted, Index: index}, {Path: p.path, Type: ChangeChildren, Index: index}}
	return append(changes, s.wakePermit(index, heir)...)
}

func (s *State) ensurePrefix(index uint64, c *Command) (Result, []Change) {
	if err := api.ValidatePath(c.Path); err != nil {
		return Result{Err: asAPIError(err)}, nil
	}
	if api.Parent(c.Path) != "/" {
		return Result{Err: api.Errorf(api.CodeInvalidPath, "%s is not a top-level prefix", c.Path)}, nil
	}
	if c.Epoch > api.MaxTokenEpoch {
		// Tokens under it would not fit 63 bits (int64 in SQL goes negative).
		return Result{Err: api.Errorf(api.CodeTokenExhausted, "directory epoch %d is over the token limit %d", c.Epoch, uint64(api.MaxTokenEpoch))}, nil
	}
	if n, ok := s.nodes[c.Path]; ok {
		switch n.prefixState {
		case PrefixSealed:
			// Only an aborted migration unseals (unseal_prefix): a stale
			// view of the directory must never revive a moved prefix.
			return Result{Err: movedErr(n)}, nil
		case PrefixStaging:
			return Result{Err: api.Errorf(api.CodeUnavailable, "the copy of %s is incomplete: it is served once every page is staged", c.Path)}, nil
		}
		if c.Staged && n.prefixState != PrefixStaged && n.dirEpoch < c.Epoch {
			return Result{Err: noCopy(c.Path, c.Epoch)}, nil
		}
		var changes []Change
		if c.Epoch > n.dirEpoch || n.prefixState == PrefixStaged { // the directory epoch only goes up
			if n.prefixState == PrefixStaged {
				changes = s.startMovedDelays(index, n, c.AtMS)            // the lock-delays that moved with it start here
				changes = append(changes, s.sweepContainers(index, n)...) // container.go
				s.notePrefixServed(index, n.path)                         // changes.go: the import is no change
			}
			s.touch(n)
			n.dirEpoch = max(n.dirEpoch, c.Epoch)
			n.prefixState = "" // a staged copy is served from here on
		}
		return Result{Node: s.meta(n, false), Epoch: n.dirEpoch}, changes
	}
	if c.Staged {
		return Result{Err: noCopy(c.Path, c.Epoch)}, nil
	}
	n := &node{path: c.Path, parent: s.root, version: 1, createIndex: index, modifyIndex: index, childIndex: index, dirEpoch: max(c.Epoch, 1)}
	s.link(index, n)
	s.noteChange(index, api.ChangePut, n) // changes.go
	return Result{Node: s.meta(n, false), Epoch: n.dirEpoch}, []Change{{Path: n.path, Type: ChangeCreated, Index: index}}
}

// noCopy refuses to serve a prefix that moved here without its nodes.
func noCopy(path string, epoch uint64) *api.Error {
	return api.Errorf(api.CodeConflict, "prefix %s moved here at epoch %d but no complete copy of it is staged: not served (an empty prefix would lose its nodes)", path, epoch)
}

// --- locks ---
