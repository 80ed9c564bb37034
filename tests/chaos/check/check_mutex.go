package check

import (
	"fmt"
	"sort"

	"github.com/lockservice/lockd/api"
)

// MaxDetails bounds the violations a checker spells out; the rest are
// counted.
const MaxDetails = 20

// CheckMutualExclusion is checker (a). It works in the service's own
// order, Raft indices, from what the service said (LockObs, Deletion), so
// it needs no clock and no trust in the client library:
//
//   - once a node holds its lock it holds until it is deleted: no
//     observation may show it waiting at a later index;
//   - a node's held span runs from the first index at which it was seen
//     holding to the index before its deletion (dels; a node whose
//     deletion index is not known ends at its last observation). No two
//     spans of one lock may overlap if either node is exclusive: no two
//     sessions held the lock, or a write lock beside a read lock, at the
//     same index.
//
// It returns the number of observations checked and the violations.
func CheckMutualExclusion(obs []LockObs, dels []Deletion) (int, []Violation) {
	locks := heldSpans(obs)
	extendToDeletions(locks, dels)
	vs := &violationList{checker: "mutual-exclusion"}
	for _, lock := range sortedLocks(locks) {
		spans := heldOf(lock, locks[lock], vs)
		checkOverlaps(lock, spans, vs)
	}
	return len(obs), vs.list
}

// heldSpan is what the service said of one lock node: the indices at which
// it was seen holding (lo to hi, with where each bound came from) and
// those at which it was seen waiting.
type heldSpan struct {
	node     string
	mode     api.LockMode
	lo, hi   uint64
	held     bool
	waitAt   []uint64 // indices at which it was seen waiting
	sources  map[string]bool
	loSource string
	hiSource string
}

// heldSpans gathers the observations into one span per lock and node.
func heldSpans(obs []LockObs) map[string]map[string]*heldSpan {
	locks := map[string]map[string]*heldSpan{}
	for _, o := range obs {
		nodes := locks[o.Lock]
		if nodes == nil {
			nodes = map[string]*heldSpan{}
			locks[o.Lock] = nodes
		}
		s := nodes[o.Node]
		if s == nil {
			s = &heldSpan{node: o.Node, mode: o.Mode, sources: map[string]bool{}}
			nodes[o.Node] = s
		}
		s.observe(o)
	}
	return locks
}

// observe widens the span by one observation of its node.
func (s *heldSpan) observe(o LockObs) {
	if !o.Held {
		s.waitAt = append(s.waitAt, o.Index)
		return
	}
	if !s.held || o.Index < s.lo {
		s.lo, s.loSource = o.Index, o.Source
	}
	if !s.held || o.Index > s.hi {
		s.hi, s.hiSource = o.Index, o.Source
	}
	s.held = true
	s.sources[o.Source] = true
}

// extendToDeletions makes a held node hold until the index before its
// deletion.
func extendToDeletions(locks map[string]map[string]*heldSpan, dels []Deletion) {
	for _, d := range dels {
		if s := locks[d.Lock][d.Node]; s != nil && s.held && d.Index > 0 && d.Index-1 > s.hi {
			s.hi, s.hiSource = d.Index-1, fmt.Sprintf("deleted at %d", d.Index)
		}
	}
}

// sortedLocks is the locks' names in order.
func sortedLocks(locks map[string]map[string]*heldSpan) []string {
	lockNames := make([]string, 0, len(locks))
	for l := range locks {
		lockNames = append(lockNames, l)
	}
	sort.Strings(lockNames)
	return lockNames
}

// heldOf returns the spans of lock's nodes that were seen holding, by
// their first held index (then node), and records a violation for each of
// them seen waiting again after it held.
func heldOf(lock string, nodes map[string]*heldSpan, vs *violationList) []*heldSpan {
	var spans []*heldSpan
	for _, s := range nodes {
		if !s.held {
			continue
		}
		for _, w := range s.waitAt {
			if w > s.lo {
				vs.add("%s: %s held at index %d (%s) but was waiting again at index %d", lock, s.node, s.lo, s.loSource, w)
				break
			}
		}
		spans = append(spans, s)
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].lo != spans[j].lo {
			return spans[i].lo < spans[j].lo
		}
		return spans[i].node < spans[j].node
	})
	return spans
}

// checkOverlaps records a violation for every two of lock's held spans
// (sorted by their first index) that overlap while either is exclusive.
func checkOverlaps(lock string, spans []*heldSpan, vs *violationList) {
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if b.lo > a.hi {
				break
			}
			if a.mode == api.LockExclusive || b.mode == api.LockExclusive {
				vs.add("%s: %s (%s) held over indices [%d (%s), %d (%s)] and %s (%s) held at %d (%s): two holders at once",
					lock, a.node, a.mode, a.lo, a.loSource, a.hi, a.hiSource, b.node, b.mode, b.lo, b.loSource)
			}
		}
	}
}

// HoldersOf applies the lock rules to the lock nodes among a lock's
// children (names in sequence order): an exclusive node holds if it is the
// first; shared nodes hold while no exclusive node is before them. It
// returns the mode of every lock child and whether it holds.
func HoldersOf(names []string) (modes map[string]api.LockMode, held map[string]bool) {
	type child struct {
		name string
		seq  string
		mode api.LockMode
	}
	var cs []child
	for _, n := range names {
		switch {
		case len(n) > 2 && n[:2] == "w-":
			cs = append(cs, child{n, n[2:], api.LockExclusive})
		case len(n) > 2 && n[:2] == "r-":
			cs = append(cs, child{n, n[2:], api.LockShared})
		}
	}
	// Both kinds share one sequence counter: order by the number.
	sort.Slice(cs, func(i, j int) bool { return cs[i].seq < cs[j].seq })
	modes, held = map[string]api.LockMode{}, map[string]bool{}
	exclusiveSeen := false
	for i, c := range cs {
		modes[c.name] = c.mode
		switch c.mode {
		case api.LockExclusive:
			held[c.name] = i == 0
			exclusiveSeen = true
		case api.LockShared:
			held[c.name] = !exclusiveSeen
		}
	}
	return modes, held
}

// ModeOf is the lock mode of a lock node by its name.
func ModeOf(node string) api.LockMode {
	name := node
	if i := lastSlash(node); i >= 0 {
		name = node[i+1:]
	}
	if len(name) > 2 && name[:2] == "r-" {
		return api.LockShared
	}
	return api.LockExclusive
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}
