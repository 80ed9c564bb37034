package fsm

// Kept lock-delays that move with their prefix (issue 23, findings 7 and
// 8 joined). A lock directory deleted during its lock-delay leaves the
// delay and its sequence counter in the cell's table (State.lockDelays,
// lockdelay.go). The seal freezes the ones under the prefix on the
// prefix root's move state; the export carries them as entries without a
// node (api.ExportedNode.Kept); the new cell stages them on its copy's
// root and keeps them in its table from the entry that first serves the
// prefix there, timed from that entry like the other moved delays (no
// clock in apply). So neither the delay nor the lock nodes' sequence
// restarts with a move, and a prefix moving back while one is kept takes
// the higher counter.

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// movedKept is a kept lock-delay under a moving prefix: the deleted
// directory's path, the delay the new cell keeps (its full length, at
// most api.MaxMovedLockDelay), the directory's sequence counter and its
// tenant.
type movedKept struct {
	path    string
	ms      int64
	nextSeq uint64
	tenant  string
}

// snapMovedKept is a movedKept in a snapshot (on a prefix root's move).
type snapMovedKept struct {
	Path    string `json:"p"`
	MS      int64  `json:"d"`
	NextSeq uint64 `json:"ns,omitempty"`
	Tenant  string `json:"t,omitempty"`
}

func keptImage(kept []movedKept) []snapMovedKept {
	var out []snapMovedKept
	for _, k := range kept {
		out = append(out, snapMovedKept{Path: k.path, MS: k.ms, NextSeq: k.nextSeq, Tenant: k.tenant})
	}
	return out
}

func keptState(kept []snapMovedKept) []movedKept {
	var out []movedKept
	for _, k := range kept {
		out = append(out, movedKept{path: k.Path, ms: k.MS, nextSeq: k.NextSeq, tenant: k.Tenant})
	}
	return out
}

// keptList is the kept delays moving with a prefix root (nil: none).
func (m *moveState) keptList() []movedKept {
	if m == nil {
		return nil
	}
	return m.kept
}

// hasKept reports whether a kept delay at path moves with the prefix.
func (m *moveState) hasKept(path string) bool {
	kept := m.keptList()
	i := sort.Search(len(kept), func(i int) bool { return kept[i].path >= path })
	return i < len(kept) && kept[i].path == path
}

// under reports whether path is prefix or below it.
func under(prefix, path string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// setKept replaces the kept delays moving with the prefix root n (the
// slice is never changed in place afterwards).
func (s *State) setKept(n *node, kept []movedKept) {
	gen, next := n.move.genNext()
	delayMS := n.move.delay()
	s.touch(n)
	if gen == 0 && next == 0 && delayMS == 0 && len(kept) == 0 {
		n.move = nil
		return
	}
	n.move = &moveState{gen: gen, next: next, delayMS: delayMS, kept: kept}
}

// sealKept freezes, at the seal, the delays kept under root's prefix as
// they move: the leader may end one here after the seal, but the export
// (and the digest the copy must match) carries it still.
func (s *State) sealKept(root *node) {
	var kept []movedKept
	for dir, d := range s.lockDelays {
		if under(root.path, dir) {
			kept = append(kept, movedKept{path: dir, ms: min(d.ms, api.MaxMovedLockDelay.Milliseconds()), nextSeq: d.nextSeq, tenant: d.tenant})
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].path < kept[j].path })
	s.setKept(root, kept)
}

// incomingKept counts the kept delays the copies staged here bring: the
// cell's table takes them when it serves them, so its bound counts them
// from the stage on.
func (s *State) incomingKept() int {
	total := 0
	for _, p := range s.root.children() {
		if p.prefixState == PrefixStaging || p.prefixState == PrefixStaged {
			total += len(p.move.keptList())
		}
	}
	return total
}

// dropKeptUnder forgets the delays kept here under the prefix: it moved
// away (they moved with it) or a copy of it starts over here.
func (s *State) dropKeptUnder(prefix string) {
	for dir := range s.lockDelays {
		if under(prefix, dir) {
			s.dropKept(dir)
		}
	}
}

// installKept keeps, from this entry (the first that serves root's
// moved prefix here), the delays that moved with it, each timed from
// here; a delay kept at the path already keeps the longer length and
// the higher sequence counter (a counter never goes back).
func (s *State) installKept(index uint64, root *node, atMS int64) []Change {
	kept := root.move.keptList()
	s.setKept(root, nil)
	if mutant.On(mutant.MoveDelay) {
		return nil
	}
	var changes []Change
	for _, k := range kept {
		d := &lockDelay{index: index, ms: k.ms, atMS: atMS, nextSeq: k.nextSeq, tenant: k.tenant}
		if old, ok := s.lockDelays[k.path]; ok {
			d.ms, d.nextSeq = max(d.ms, old.ms), max(d.nextSeq, old.nextSeq)
		}
		s.putKept(k.path, d)
		changes = append(changes, Change{Path: k.path, Type: ChangeLockDelay, Index: index})
	}
	return changes
}

// checkStagedKept checks a stage page's kept entries (en.Kept) before
// anything changes: each under the prefix, not its root, without value
// or version, with a delay; after the copy's kept entries so far, and at
// no node of the copy; and the cell's table, with every staged copy's,
// within its bound.
func (s *State) checkStagedKept(root *node, start, staging bool, c *Command) *api.Error {
	var have []movedKept
	if staging && !start {
		have = root.move.keptList()
	}
	count := 0
	for _, en := range c.Nodes {
		if !en.Kept {
			if len(have) > 0 && root.move.hasKept(en.Path) {
				return api.Errorf(api.CodeBadRequest, "staged node %s is where the copy keeps a deleted lock directory's delay", en.Path)
			}
			continue
		}
		count++
		switch {
		case en.Path == c.Path || len(en.Value) > 0 || en.Version != 0:
			return api.Errorf(api.CodeBadRequest, "kept lock-delay %s: an entry without a node, under the prefix, has no value or version", en.Path)
		case en.DelayMS <= 0 || en.NextSeq > maxSeq+1:
			return api.Errorf(api.CodeBadRequest, "kept lock-delay %s: delay %d ms, next sequence %d", en.Path, en.DelayMS, en.NextSeq)
		case len(have) > 0 && en.Path <= have[len(have)-1].path:
			return api.Errorf(api.CodeBadRequest, "kept lock-delay %s comes after the copy's %s", en.Path, have[len(have)-1].path)
		}
		if _, ok := s.nodes[en.Path]; ok && !start {
			return api.Errorf(api.CodeBadRequest, "kept lock-delay %s is where the copy has a node", en.Path)
		}
	}
	if count == 0 {
		return nil
	}
	total := len(s.lockDelays) + s.incomingKept() + count
	if staging && start {
		total -= len(root.move.keptList()) // the copy starts over: its earlier kept entries go
	}
	if total > s.limits.deletedDelays {
		return api.Errorf(api.CodeLimitExceeded, "the copy of %s brings %d kept lock-delays; with those the cell keeps and other copies bring, %d, over the limit %d (MaxDeletedLockDelays): abort the move, or resume it once delays end",
			c.Path, count, total, s.limits.deletedDelays)
	}
	return nil
}

// stageKept adds a checked stage page's kept entries to the copy's root.
func (s *State) stageKept(root *node, c *Command) {
	var page []movedKept
	for _, en := range c.Nodes {
		if en.Kept {
			page = append(page, movedKept{path: en.Path, ms: en.DelayMS, nextSeq: en.NextSeq, tenant: en.Tenant})
		}
	}
	if len(page) > 0 {
		s.setKept(root, slices.Concat(root.move.keptList(), page))
	}
}

// exportEntry is a node or a kept delay of a sealed prefix, in export.
type exportEntry struct {
	path string
	n    *node
	k    *movedKept
}

func (e exportEntry) exported() api.ExportedNode {
	if e.k != nil {
		return api.ExportedNode{Path: e.k.path, NextSeq: e.k.nextSeq, Tenant: exportedOwner(e.k.tenant), DelayMS: e.k.ms, Kept: true}
	}
	n := e.n
	return api.ExportedNode{Path: n.path, Value: valueBytes(n.value), Version: n.version, NextSeq: n.nextSeq, Tenant: exportedOwner(n.tenant), DelayMS: n.move.delay(),
		Container: n.container}
}

// exportEntries lists root's persistent nodes and the kept delays moving
// with it, in path order.
func (s *State) exportEntries(root *node) []exportEntry {
	kept := root.move.keptList()
	all := make([]exportEntry, 0, 1+len(kept))
	for _, n := range append([]*node{root}, s.below(root)...) {
		if !n.ephemeral { // none are left after a seal; belt and braces
			all = append(all, exportEntry{path: n.path, n: n})
		}
	}
	for i := range kept {
		all = append(all, exportEntry{path: kept[i].path, k: &kept[i]})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].path < all[j].path })
	return all
}

// checkMovedKept verifies the kept delays moving with prefixes: only on
// a prefix root sealed or staged here, under it, in path order, in range,
// none (on a copy) where a node is; and the cell's table with the copies'
// within its bound.
func (s *State) checkMovedKept() error {
	incoming := 0
	for _, p := range s.root.children() {
		kept := p.move.keptList()
		if len(kept) == 0 {
			continue
		}
		if p.prefixState == "" {
			return fmt.Errorf("prefix %s is served here but keeps %d moving lock-delays", p.path, len(kept))
		}
		if p.prefixState != PrefixSealed {
			incoming += len(kept)
		}
		for i, k := range kept {
			switch {
			case k.path == p.path || !under(p.path, k.path) || api.ValidatePath(k.path) != nil:
				return fmt.Errorf("moving lock-delay of %q on prefix %s", k.path, p.path)
			case i > 0 && k.path <= kept[i-1].path:
				return fmt.Errorf("moving lock-delays of %s out of order at %s", p.path, k.path)
			case k.ms <= 0 || k.ms > api.MaxMovedLockDelay.Milliseconds() || k.nextSeq > maxSeq+1 || len(k.tenant) > api.MaxTenantName:
				return fmt.Errorf("moving lock-delay of %s out of range: %+v", k.path, k)
			}
			if _, ok := s.nodes[k.path]; ok {
				return fmt.Errorf("moving lock-delay of %s where a node is", k.path)
			}
		}
	}
	if len(s.lockDelays)+incoming > api.MaxDeletedLockDelays {
		return fmt.Errorf("%d lock-delays kept and %d moving in, limit %d", len(s.lockDelays), incoming, api.MaxDeletedLockDelays)
	}
	return nil
}
