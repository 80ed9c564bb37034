package fsm

import (
	"sort"
	"strings"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// Prefix root states (api.PrefixOpResponse.State uses the same words, and
// "serving" for the empty state).
const (
	PrefixServing = api.PrefixServing // PrefixInfo.State of a prefix served here
	PrefixSealed  = "sealed"
	PrefixStaging = "staging" // a copy is arriving
	PrefixStaged  = "staged"  // the copy is complete, waiting for the directory's commit
)

// CheckServes answers whether this cell serves path's prefix now: nil, or
// wrong_cell (never held here), moved (sealed: naming the new cell) or
// unavailable (a migration is copying it here and it is not served yet).
func (s *State) CheckServes(path string) *api.Error {
	root, ok := s.nodes[api.Prefix(path)]
	if !ok {
		return api.Errorf(api.CodeWrongCell, "this cell does not serve prefix %s", api.Prefix(path))
	}
	switch root.prefixState {
	case PrefixSealed:
		return movedErr(root)
	case PrefixStaging, PrefixStaged:
		return api.Errorf(api.CodeUnavailable, "prefix %s is moving to this cell and not served yet", root.path)
	}
	return nil
}

// routingRefusal reports whether a command was refused because this cell
// does not serve its prefix now (CheckServes): such a refusal applied
// nothing and may be answered differently later.
func routingRefusal(e *api.Error) bool {
	return e != nil && (e.Code == api.CodeMoved || e.Code == api.CodeWrongCell || e.Code == api.CodeUnavailable)
}

func movedErr(root *node) *api.Error {
	e := api.Errorf(api.CodeMoved, "prefix %s moved to cell %s", root.path, root.movedTo())
	e.Cell = root.movedTo()
	return e
}

// PrefixInfo is a prefix root's state here: State is "serving",
// "sealed", "staging", "staged", or "" if this cell has no such prefix.
type PrefixInfo struct {
	State        string
	Epoch        uint64
	MovedTo      string
	SealDirIndex uint64
}

// PrefixState describes a prefix root here.
func (s *State) PrefixState(prefix string) PrefixInfo {
	root, ok := s.nodes[prefix]
	if !ok || api.Parent(prefix) != "/" {
		return PrefixInfo{}
	}
	st := root.prefixState
	if st == "" {
		st = PrefixServing
	}
	return PrefixInfo{State: st, Epoch: root.dirEpoch, MovedTo: root.movedTo(), SealDirIndex: root.sealDirIndex()}
}

// prefixRoot returns the root of a top-level prefix named by a command.
func (s *State) prefixRoot(path string) (*node, *api.Error) {
	if err := api.ValidatePath(path); err != nil {
		return nil, asAPIError(err)
	}
	if api.Parent(path) != "/" {
		return nil, api.Errorf(api.CodeInvalidPath, "%s is not a top-level prefix", path)
	}
	root, ok := s.nodes[path]
	if !ok {
		return nil, api.Errorf(api.CodeWrongCell, "this cell has no prefix %s", path)
	}
	return root, nil
}

// below returns the nodes strictly under root, deepest first (children
// before their parents, so they can be removed in order).
func (s *State) below(root *node) []*node {
	var out []*node
	var walk func(n *node)
	walk = func(n *node) {
		for _, c := range n.children() {
			walk(c)
			out = append(out, c)
		}
	}
	walk(root)
	return out
}

// sealPrefix refuses every later write and read under the prefix with
// moved (naming c.Cell), and deletes its ephemeral nodes at this index:
// their holders lose their locks here, so the old and the new cell never
// both grant under the prefix. Persistent nodes stay, frozen, to be
// exported, with the lock-delays that move (movingDelays): a lock held
// here now is granted on the new cell only once its holder's lease and
// lock-delay may have run. Sealing again for the same cell changes
// nothing. The result counts and digests the sealed nodes
// (prefixDigest): a copy is committed only if it has the same.
func (s *State) sealPrefix(index uint64, c *Command) (Result, []Change) {
	root, err := s.prefixRoot(c.Path)
	if err != nil {
		return Result{Err: err}, nil
	}
	if c.Cell == "" {
		return Result{Err: api.Errorf(api.CodeBadRequest, "a seal names the cell the prefix moves to")}, nil
	}
	switch root.prefixState {
	case PrefixSealed:
		if root.movedTo() != c.Cell {
			return Result{Err: api.Errorf(api.CodeConflict, "prefix %s is sealed for a move to %s, not %s", c.Path, root.movedTo(), c.Cell)}, nil
		}
		count, digest := s.prefixDigest(root)
		return Result{Epoch: root.dirEpoch, Count: count, Digest: digest}, nil
	case PrefixStaging, PrefixStaged:
		return Result{Err: api.Errorf(api.CodeConflict, "prefix %s is staged here, not served: nothing to seal", c.Path)}, nil
	}
	var changes []Change
	below := s.below(root)
	s.sealMoves(root, below, s.movingDelays(root, below))
	for _, n := range below {
		if n.ephemeral && !mutant.On(mutant.SealKeepsEphemerals) {
			changes = append(changes, s.removeNode(index, n)...)
		}
	}
	s.sealKept(root) // after the removals: a delay one kept moves too
	s.touch(root)
	r := root.rareOf()
	r.movedTo, r.sealDirIndex = c.Cell, c.DirIndex
	root.prefixState = PrefixSealed
	root.setRare(r)
	if !mutant.On(mutant.SealKeepsEphemerals) {
		changes = append(changes, Change{Path: root.path, Type: ChangeMoved, Index: index})
	}
	count, digest := s.prefixDigest(root)
	return Result{Epoch: root.dirEpoch, Count: count, Digest: digest}, changes
}

// unsealPrefix serves a sealed prefix again (its migration aborted). It
// names the directory state that says so; one older than the migration
// that sealed the prefix (a stale view) is refused. The seal took the
// locks held under the prefix from holders that may still act on them
// for a lease: the delays it recorded for the new cell (sealMoves) start
// here instead, timed from this entry, so the old cell grants such a
// lock to nobody before the new cell would have.
func (s *State) unsealPrefix(index uint64, c *Command) (Result, []Change) {
	root, err := s.prefixRoot(c.Path)
	if err != nil {
		return Result{Err: err}, nil
	}
	var changes []Change
	switch root.prefixState {
	case PrefixStaging, PrefixStaged:
		return Result{Err: api.Errorf(api.CodeConflict, "prefix %s is staged here: drop it instead", c.Path)}, nil
	case PrefixSealed:
		if c.DirIndex < root.sealDirIndex() {
			return Result{Err: api.Errorf(api.CodeConflict, "prefix %s was sealed by the migration begun at directory index %d; an unseal from index %d is stale", c.Path, root.sealDirIndex(), c.DirIndex)}, nil
		}
		s.setKept(root, nil) // the kept delays under it stay in this cell's table
		changes = s.startMoveRecords(index, root, c.AtMS, mutant.On(mutant.AbortDelay))
		s.touch(root)
		r := root.rareOf()
		r.movedTo, r.sealDirIndex = "", 0
		root.prefixState = ""
		root.setRare(r)
		changes = append(changes, s.sweepContainers(index, root)...) // container.go: the seal emptied them
	}
	return Result{Epoch: root.dirEpoch}, changes
}

// stagePrefix copies a page of a moving prefix's persistent nodes here,
// not yet served. A copy belongs to one driver generation (c.DirIndex:
// the directory index at which its driver began or took over) and takes
// its pages in order (c.Page from 0): page 0 of a newer generation starts
// the copy over (an earlier partial or complete copy, or the tombstone of
// an earlier move away, is dropped); a page of an older generation is
// refused (its driver was taken over), a page the copy has changes
// nothing, one past the next is refused. The last page (Last) completes
// the copy, and its result counts and digests it (prefixDigest); from
// then it only changes by being served (ensure_prefix, once the
// directory commits the move), dropped (the move aborted), or started
// over by a newer driver before the commit. Values, versions, sequence
// counters and moving lock-delays are kept; indices are this cell's.
func (s *State) stagePrefix(index uint64, c *Command) (Result, []Change) {
	root, start, dup, err := s.checkStage(c)
	if err != nil {
		return Result{Err: err}, nil
	}
	var changes []Change
	if !dup {
		root, changes = s.applyStage(index, root, start, c)
	}
	res := Result{Epoch: root.dirEpoch}
	if c.Last && root.prefixState == PrefixStaged {
		res.Count, res.Digest = s.prefixDigest(root)
	}
	return res, changes
}

// checkStage checks a stage page in full before anything changes: the
// prefix and epoch, the page's generation and number (checkStageGen),
// and its nodes: in path order, under the prefix, each parent the root
// or already there.
func (s *State) checkStage(c *Command) (root *node, start, dup bool, err *api.Error) {
	if err := api.ValidatePath(c.Path); err != nil {
		return nil, false, false, asAPIError(err)
	}
	if api.Parent(c.Path) != "/" {
		return nil, false, false, api.Errorf(api.CodeInvalidPath, "%s is not a top-level prefix", c.Path)
	}
	if c.Epoch == 0 || c.Epoch > api.MaxTokenEpoch {
		return nil, false, false, api.Errorf(api.CodeBadRequest, "stage needs a directory epoch in [1, %d]", uint64(api.MaxTokenEpoch))
	}
	if c.DirIndex == 0 {
		return nil, false, false, api.Errorf(api.CodeBadRequest, "stage needs its driver's generation (the directory index of its begin or take-over)")
	}
	root, exists := s.nodes[c.Path]
	switch {
	case exists && root.prefixState == "":
		return nil, false, false, api.Errorf(api.CodeConflict, "prefix %s is served by this cell", c.Path)
	case exists && root.prefixState == PrefixSealed && c.Epoch <= root.dirEpoch:
		return nil, false, false, api.Errorf(api.CodeConflict, "prefix %s was here under epoch %d; a move back needs a higher one", c.Path, root.dirEpoch)
	}
	staging := exists && (root.prefixState == PrefixStaging || root.prefixState == PrefixStaged)
	if start, dup, err = checkStageGen(root, staging, c); err != nil || dup {
		return root, start, dup, err
	}
	have := func(p string) bool {
		if p == c.Path {
			return true
		}
		_, ok := s.nodes[p]
		return ok && !start
	}
	inPage := map[string]bool{}
	for i, en := range c.Nodes {
		if err := checkStagedNode(c, i, en); err != nil {
			return nil, false, false, err
		}
		if en.Kept {
			continue // no node: checkStagedKept
		}
		if pp := api.Parent(en.Path); en.Path != c.Path && !inPage[pp] && !have(pp) {
			return nil, false, false, api.Errorf(api.CodeBadRequest, "staged node %s comes before its parent", en.Path)
		}
		inPage[en.Path] = true
	}
	if err := s.checkStagedKept(root, start, staging, c); err != nil {
		return nil, false, false, err
	}
	return root, start, false, nil
}

// checkStagedNode checks the i-th node of a stage page on its own.
func checkStagedNode(c *Command, i int, en api.ExportedNode) *api.Error {
	if err := api.ValidatePath(en.Path); err != nil {
		return asAPIError(err)
	}
	if en.Path != c.Path && !strings.HasPrefix(en.Path, c.Path+"/") {
		return api.Errorf(api.CodeBadRequest, "node %s is not under %s", en.Path, c.Path)
	}
	if err := checkValue(en.Value); err != nil {
		return err
	}
	if len(en.Tenant) > api.MaxTenantName {
		return api.Errorf(api.CodeBadRequest, "staged node %s names a tenant of %d bytes, limit %d", en.Path, len(en.Tenant), api.MaxTenantName)
	}
	if i > 0 && en.Path <= c.Nodes[i-1].Path {
		return api.Errorf(api.CodeBadRequest, "staged nodes must be in path order")
	}
	return checkStagedDelay(en)
}

// applyStage applies a checked stage page.
func (s *State) applyStage(index uint64, root *node, start bool, c *Command) (*node, []Change) {
	var changes []Change
	if start {
		if root != nil {
			changes = s.removeSubtree(index, root, true)
		}
		s.dropKeptUnder(c.Path) // an earlier move away's: the copy brings the prefix's own
		root = &node{path: c.Path, parent: s.root, version: 1, createIndex: index, modifyIndex: index, childIndex: index, dirEpoch: c.Epoch, prefixState: PrefixStaging}
		s.link(index, root)
		changes = append(changes, Change{Path: root.path, Type: ChangeCreated, Index: index})
	}
	for _, en := range c.Nodes {
		if en.Kept {
			continue // stageKept
		}
		if n, ok := s.nodes[en.Path]; ok { // the root
			s.touch(n)
			delta := int64(len(en.Value) - len(n.value))
			s.bytes += delta
			s.use(n.tenant, 0, 0, delta)
			// link took any counter kept at the path: a counter never goes back.
			n.value, n.version, n.nextSeq = string(en.Value), max(en.Version, 1), max(n.nextSeq, en.NextSeq)
			gen, next := n.move.genNext()
			s.setMove(n, gen, next, en.DelayMS)
			continue
		}
		// The node keeps its owner: the tenant's usage here counts it, so
		// its quota holds across the move.
		n := &node{path: en.Path, parent: s.nodes[api.Parent(en.Path)], value: string(en.Value), version: max(en.Version, 1), nextSeq: en.NextSeq,
			tenant: en.Tenant, createIndex: index, modifyIndex: index, childIndex: index, container: en.Container}
		if en.DelayMS > 0 {
			n.move = &moveState{delayMS: en.DelayMS}
		}
		s.link(index, n)
	}
	s.setMove(root, c.DirIndex, c.Page+1, root.move.delay())
	s.stageKept(root, c)
	if c.Last {
		s.touch(root)
		root.prefixState = PrefixStaged
	}
	return root, changes
}

// dropPrefix removes the nodes of a prefix that moved away (sealed: the
// root stays as the tombstone that answers moved) or of a staged copy
// whose migration aborted (the root goes too).
func (s *State) dropPrefix(index uint64, c *Command) (Result, []Change) {
	root, err := s.prefixRoot(c.Path)
	if err != nil {
		if err.Code == api.CodeWrongCell {
			return Result{}, nil // nothing here: dropped already
		}
		return Result{Err: err}, nil
	}
	switch root.prefixState {
	case "":
		return Result{Err: api.Errorf(api.CodeConflict, "prefix %s is served by this cell: seal it first", c.Path)}, nil
	case PrefixStaging, PrefixStaged:
		return Result{}, s.removeSubtree(index, root, true)
	}
	s.setKept(root, nil)
	// The seal fired every watch under the prefix and no read under it
	// has armed one since: the nodes go without events (they live on in
	// the new cell; a "deleted" would be false).
	s.removeSubtree(index, root, false)
	// The delays kept under it (those its nodes held too) moved with it
	// (keptmove.go).
	s.dropKeptUnder(c.Path)
	return Result{Epoch: root.dirEpoch}, nil
}

// removeSubtree removes every node under root, and root itself if
// withRoot. removeNode keeps the delays they hold; a caller discarding
// the prefix drops those (dropKeptUnder).
func (s *State) removeSubtree(index uint64, root *node, withRoot bool) []Change {
	var changes []Change
	for _, n := range s.below(root) {
		changes = append(changes, s.removeNode(index, n)...)
	}
	if withRoot {
		changes = append(changes, s.removeNode(index, root)...)
	}
	return changes
}

// ExportPrefix returns up to limit persistent nodes of a sealed prefix,
// and the kept lock-delays moving with it (entries without a node), in
// path order, the root first, after the path after ("" for the first
// page), and whether more follow.
func (s *State) ExportPrefix(prefix, after string, limit int) ([]api.ExportedNode, bool, *api.Error) {
	root, err := s.prefixRoot(prefix)
	if err != nil {
		return nil, false, err
	}
	if root.prefixState != PrefixSealed {
		return nil, false, api.Errorf(api.CodeConflict, "prefix %s is not sealed: only a sealed prefix is exported (it no longer changes)", prefix)
	}
	all := s.exportEntries(root)
	i := sort.Search(len(all), func(i int) bool { return all[i].path > after })
	var out []api.ExportedNode
	for ; i < len(all) && len(out) < limit; i++ {
		if lossyExportSkips(all[i]) {
			continue // a mutant only (mutant.LossyExport)
		}
		out = append(out, all[i].exported())
	}
	return out, i < len(all), nil
}
