package fsm

// What a prefix move keeps beside the nodes it copies (issue 23,
// findings 1 and 7): the driver's generation and next page of a copy
// being staged, and the lock-delays that move with the prefix; and the
// digest that proves a staged copy is its sealed source.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sort"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// moveState is a node's part in a prefix move (nil: none). It is
// replaced, never changed in place (a snapshot image may share it).
type moveState struct {
	// gen and next, on the root of a copy being staged here: the
	// generation (directory index) of the driver whose copy it is, and
	// the number of the next page it takes.
	gen, next uint64
	// delayMS, on a lock directory of a sealed or staged prefix: the
	// lock-delay the new cell starts on it when it serves the prefix.
	delayMS int64
	// kept, on the root of a sealed or staged prefix: the lock-delays kept
	// for lock directories deleted under it, in path order (keptmove.go).
	kept []movedKept
}

// snapMove is a moveState in a snapshot.
type snapMove struct {
	Gen     uint64          `json:"g,omitempty"`
	Next    uint64          `json:"n,omitempty"`
	DelayMS int64           `json:"d,omitempty"`
	Kept    []snapMovedKept `json:"k,omitempty"`
}

func (m *moveState) image() *snapMove {
	if m == nil {
		return nil
	}
	return &snapMove{Gen: m.gen, Next: m.next, DelayMS: m.delayMS, Kept: keptImage(m.kept)}
}

func (m *snapMove) state() *moveState {
	if m == nil {
		return nil
	}
	return &moveState{gen: m.Gen, next: m.Next, delayMS: m.DelayMS, kept: keptState(m.Kept)}
}

func (m *moveState) genNext() (gen, next uint64) {
	if m == nil {
		return 0, 0
	}
	return m.gen, m.next
}

func (m *moveState) delay() int64 {
	if m == nil {
		return 0
	}
	return m.delayMS
}

// setMove replaces n's move state (all zero: none), keeping its kept
// delays (setKept changes those).
func (s *State) setMove(n *node, gen, next uint64, delayMS int64) {
	kept := n.move.keptList()
	s.touch(n)
	if gen == 0 && next == 0 && delayMS == 0 && len(kept) == 0 {
		n.move = nil
		return
	}
	n.move = &moveState{gen: gen, next: next, delayMS: delayMS, kept: kept}
}

// movingDelays are the lock-delays a seal of root hands to the new cell,
// by lock directory: a delay in force, and for each lock held now its
// holder's lease plus its lock-delay (the holder may act on the lock
// for up to a lease after its last KeepAlive, and the seal takes the
// lock from it without its knowing). Called before the seal removes the
// lock nodes.
func (s *State) movingDelays(root *node, below []*node) map[*node]int64 {
	out := map[*node]int64{}
	for _, n := range append([]*node{root}, below...) {
		if d, ok := s.LockDelayOf(n.path); ok && !n.ephemeral {
			out[n] = max(out[n], d.MS)
		}
		if !n.ephemeral || n.lock == api.LockNone || waitOn(n) != nil || mutant.On(mutant.MoveDelay) {
			continue
		}
		if sess, ok := s.sessions[n.owner]; ok {
			out[n.parent] = max(out[n.parent], sess.leaseMS+int64(n.lockDelayMS))
		}
	}
	for n, ms := range out {
		out[n] = min(ms, api.MaxMovedLockDelay.Milliseconds())
	}
	return out
}

// sealMoves records the delays that move (movingDelays) on their lock
// directories, and forgets those of an earlier, aborted, move.
func (s *State) sealMoves(root *node, below []*node, delays map[*node]int64) {
	for _, n := range append([]*node{root}, below...) {
		if n.ephemeral {
			continue
		}
		if ms := delays[n]; ms > 0 || n.move != nil {
			s.setMove(n, 0, 0, ms)
		}
	}
}

// startMovedDelays starts, at this entry (the first that serves a moved
// prefix here), the lock-delay that moved with each lock directory of
// root's copy: nobody is granted such a lock before it ends. The leader
// times its end from its own apply of this entry, like a release's. The
// kept delays that moved with it (installKept) start here too.
func (s *State) startMovedDelays(index uint64, root *node, atMS int64) []Change {
	changes := s.installKept(index, root, atMS)
	return append(changes, s.startMoveRecords(index, root, atMS, mutant.On(mutant.MoveDelay))...)
}

// startMoveRecords clears the move records of root's prefix and starts,
// at this entry, the lock-delay each lock directory's record carries
// (sealMoves), the longer of it and a delay in force: on the new cell at
// its first serving entry, on the old one at the unseal of an aborted
// move (the seal took those locks from holders that may still act).
// skip clears the records without starting them (a broken build only).
func (s *State) startMoveRecords(index uint64, root *node, atMS int64, skip bool) []Change {
	var changes []Change
	for _, n := range append([]*node{root}, s.below(root)...) {
		if n.move == nil {
			continue
		}
		ms := n.move.delayMS
		s.setMove(n, 0, 0, 0)
		if ms <= 0 || skip {
			continue
		}
		if n.delay != nil {
			ms = max(ms, n.delay.ms)
		}
		s.touch(n)
		n.delay = &lockDelay{index: index, ms: ms, atMS: atMS}
		changes = append(changes, Change{Path: n.path, Type: ChangeLockDelay, Index: index})
	}
	return changes
}

// prefixDigest counts the persistent nodes of root's prefix, the root
// included, and digests them in path order as a move copies them: path,
// value, version, sequence counter, owner and moving lock-delay, then the
// kept delays moving with it (keptmove.go). The old
// cell computes it at the seal, the new one over its staged copy: equal
// digests, equal copies.
func (s *State) prefixDigest(root *node) (int, string) {
	all := append([]*node{root}, s.below(root)...)
	sort.Slice(all, func(i, j int) bool { return all[i].path < all[j].path })
	h := sha256.New()
	count := 0
	var buf [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(buf[:], uint64(len(b)))
		h.Write(buf[:])
		h.Write(b)
	}
	num := func(v uint64) {
		binary.BigEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	for _, n := range all {
		if n.ephemeral {
			continue
		}
		count++
		field([]byte(n.path))
		field([]byte(n.value))
		num(max(n.version, 1))
		num(n.nextSeq)
		field([]byte(n.tenant))
		num(uint64(n.move.delay()))
		if n.container { // container.go: absent for other nodes, so their digests are as before
			field([]byte("container"))
		}
	}
	for _, k := range root.move.keptList() { // "kept" is no path: no node's fields read so
		field([]byte("kept"))
		field([]byte(k.path))
		num(k.nextSeq)
		field([]byte(k.tenant))
		num(uint64(k.ms))
	}
	return count, hex.EncodeToString(h.Sum(nil))
}

// checkStageGen decides what a stage page does to the copy here: start
// it over (a new generation's first page), add to it (the next page of
// its generation), nothing (a page it has: dup), or refuse it (a page of
// an older generation, whose driver was taken over; a page past the
// next).
func checkStageGen(root *node, staging bool, c *Command) (start, dup bool, err *api.Error) {
	var gen, next uint64
	if staging {
		gen, next = root.move.genNext()
	}
	switch {
	case !staging || c.DirIndex > gen || mutant.On(mutant.StageGen) && c.Page == 0:
		if c.Page != 0 {
			return false, false, api.Errorf(api.CodeConflict, "no copy of %s by the driver of generation %d is being staged here: start with page 0", c.Path, c.DirIndex)
		}
		return true, false, nil
	case c.DirIndex < gen && !mutant.On(mutant.StageGen):
		return false, false, api.Errorf(api.CodeMigrationInProgress, "the copy of %s here is generation %d's; this page is generation %d's, a driver taken over since: it stops", c.Path, gen, c.DirIndex)
	case c.Epoch != root.dirEpoch:
		return false, false, api.Errorf(api.CodeConflict, "the copy of %s here is for epoch %d, not %d", c.Path, root.dirEpoch, c.Epoch)
	case c.Page < next:
		return false, true, nil
	case c.Page > next:
		return false, false, api.Errorf(api.CodeConflict, "page %d of the copy of %s comes before page %d", c.Page, c.Path, next)
	case root.prefixState == PrefixStaged:
		return false, false, api.Errorf(api.CodeConflict, "the copy of %s is complete (%d pages): page %d is past its last", c.Path, next, c.Page)
	}
	return false, false, nil
}

// checkStagedDelay checks a staged node's moving lock-delay.
func checkStagedDelay(en api.ExportedNode) *api.Error {
	if en.DelayMS < 0 || en.DelayMS > api.MaxMovedLockDelay.Milliseconds() {
		return api.Errorf(api.CodeBadRequest, "staged node %s has a lock-delay of %d ms, outside 0 to %d", en.Path, en.DelayMS, api.MaxMovedLockDelay.Milliseconds())
	}
	return nil
}
