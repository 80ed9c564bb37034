package fsm

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// The change ring: every create, put and delete of a node applied on a
// served prefix, kept in memory so that RouteChanges (the etcd gateway's
// watches) can read what happened since an index. It is soft state of
// the replica: an output of apply, never an input (no apply reads it, so
// it cannot make replicas diverge), not part of snapshots or of the
// state's content (WriteSnapshot and CheckInvariants ignore it).
//
// Floor is the lowest index the ring covers completely: every change at
// an index >= Floor is in the ring. It starts at 1 on a fresh state, at
// the snapshot's index + 1 on a state read from a snapshot (the changes
// before were never seen here), and rises as the bounds drop the oldest
// changes (a whole index at a time: an index is covered whole or not).
//
// Moves: nodes changed while their prefix is not served here (a copy
// being staged; a sealed prefix's ephemerals going at the seal, its
// nodes at the drop) record nothing: the staged copy's import is not a
// change (the nodes moved, they did not change), and the old cell no
// longer answers for the prefix (moved). When a staged prefix starts to
// be served here its floor is set to the index after that entry: a read
// from below it answers Floor above From (compacted), so the reader
// re-reads the prefix instead of taking the import for a gap-free
// history. The same applies to a restore's drop of prefixes: they are
// no longer served here.

// changeRing is the ring; see above: a circular buffer of the live
// changes, oldest at head, grown by doubling up to api.MaxChangeRing.
type changeRing struct {
	buf   []ringChange
	head  int // buf index of the oldest change
	n     int // live changes
	bytes int64
	floor uint64
	// prefixFloors: for a prefix that moved here, the first index after
	// the entry that began serving it. Bounded by the cell's prefixes;
	// an entry at or below floor is dropped as floor passes it.
	prefixFloors map[string]uint64
}

// ringMinCap is the ring's first allocation (it grows by doubling).
const ringMinCap = 64

// ringChange is one change as the ring keeps it: the node without its
// value, and the value as the node holds it (an immutable string shared
// with the node, so recording a write copies no value; ReadChanges, far
// rarer than writes, makes the bytes).
type ringChange struct {
	api.Change
	value string
}

func newChangeRing(floor uint64) *changeRing {
	return &changeRing{floor: floor, prefixFloors: map[string]uint64{}}
}

// changeBytes is what a change costs against api.MaxChangeRingBytes.
func changeBytes(c *ringChange) int64 {
	return int64(len(c.Node.Path) + len(c.value))
}

func (r *changeRing) len() int { return r.n }

// at is the i-th live change, oldest first.
func (r *changeRing) at(i int) *ringChange { return &r.buf[(r.head+i)%len(r.buf)] }

// add appends c (its index at least the last one's), first dropping the
// oldest indexes while c would pass a bound.
func (r *changeRing) add(c ringChange) {
	for r.n > 0 && (r.n+1 > api.MaxChangeRing || r.bytes+changeBytes(&c) > api.MaxChangeRingBytes) {
		r.dropOldest()
	}
	if r.n == len(r.buf) {
		r.grow()
	}
	*r.at(r.n) = c
	r.n++
	r.bytes += changeBytes(&c)
}

// grow doubles the buffer (up to api.MaxChangeRing), oldest first.
func (r *changeRing) grow() {
	buf := make([]ringChange, min(max(2*len(r.buf), ringMinCap), api.MaxChangeRing))
	for i := 0; i < r.n; i++ {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}

// dropOldest drops every change at the oldest index and raises floor
// past it.
func (r *changeRing) dropOldest() {
	idx := r.at(0).Index
	for r.n > 0 && r.at(0).Index == idx {
		r.bytes -= changeBytes(r.at(0))
		*r.at(0) = ringChange{}
		r.head = (r.head + 1) % len(r.buf)
		r.n--
		if mutant.On(mutant.ChangesFloor) {
			break // one change of the index dropped, floor kept: a gap served as complete
		}
	}
	if !mutant.On(mutant.ChangesFloor) {
		r.floor = max(r.floor, idx+1)
	}
	for p, f := range r.prefixFloors {
		if f <= r.floor {
			delete(r.prefixFloors, p)
		}
	}
}

// noteChange records a change of n at index, if n's prefix is served
// here. For a delete it runs before n is unlinked (n as it was).
func (s *State) noteChange(index uint64, kind api.ChangeKind, n *node) {
	root, ok := s.nodes[api.Prefix(n.path)]
	if !ok || root.prefixState != "" {
		return
	}
	s.ring.add(ringChange{Change: api.Change{Index: index, Kind: kind, Node: nodeMeta(n)}, value: n.value})
}

// noteCreated records the nodes a create made: the ChangeCreated
// entries of changes (parents make_parents added, then the node), as
// they are once the create applied (containers marked).
func (s *State) noteCreated(index uint64, changes []Change) {
	for _, ch := range changes {
		if ch.Type != ChangeCreated {
			continue
		}
		if n, ok := s.nodes[ch.Path]; ok {
			s.noteChange(index, api.ChangePut, n)
		}
	}
}

// notePrefixServed notes that prefix began to be served here by the
// entry at index (a staged copy taken up): the ring covers it only from
// the next index.
func (s *State) notePrefixServed(index uint64, prefix string) {
	s.ring.prefixFloors[prefix] = index + 1
}

// ChangesPage is a read of the ring (ReadChanges).
type ChangesPage struct {
	Changes []api.Change
	More    bool
	// Floor: the lowest index covered for the root's prefix.
	Floor uint64
}

// ReadChanges returns the changes at indexes >= from to nodes at root or
// under it, oldest first, at most limit (More: others follow) - except
// that a page never cuts an index: the changes of the last index it
// holds are all there, past limit if need be (one entry can change many
// nodes: a session's end deletes all its ephemerals). Bounded by the
// ring itself (api.MaxChangeRing). A reader resumes at the index after
// the page's last, and a reader that could not read one index whole
// could never go past it. The caller checked root and limit. A read
// does not change the ring.
func (s *State) ReadChanges(root string, from uint64, limit int) ChangesPage {
	r := s.ring
	page := ChangesPage{Floor: max(r.floor, r.prefixFloors[api.Prefix(root)])}
	from = max(from, page.Floor)
	lo, hi := 0, r.n
	for lo < hi { // the first change at an index >= from
		mid := int(uint(lo+hi) >> 1)
		if r.at(mid).Index < from {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for i := lo; i < r.n; i++ {
		c := r.at(i)
		if !under(root, c.Node.Path) {
			continue
		}
		if len(page.Changes) >= limit && (c.Index != page.Changes[len(page.Changes)-1].Index || mutant.On(mutant.ChangesSplit)) {
			page.More = true
			break
		}
		out := c.Change
		out.Node.Value = valueBytes(c.value)
		page.Changes = append(page.Changes, out)
	}
	return page
}

// ChangeFloor is the ring's floor (tests read it).
func (s *State) ChangeFloor() uint64 { return s.ring.floor }

// recoveredFloor is the ring's floor on a state just read from a
// snapshot: the index after it (nothing before was seen here).
func (s *State) recoveredFloor() uint64 {
	if mutant.On(mutant.ChangesFloor) {
		return 1
	}
	return s.index + 1
}
