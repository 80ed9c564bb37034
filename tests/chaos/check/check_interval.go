package check

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/lockservice/lockd/api"
)

// CheckIntervals is the Jepsen-style mutual-exclusion check, in real time
// rather than in Raft indices: every client of the chaos process recorded,
// on the one monotonic clock of that process, when its lock's Context was
// live (Interval). No two intervals of one lock may overlap by more than
// margin if either is exclusive. margin is the SDK's DriftMargin: the
// client ends its lease that much before the cell does, so a correct
// service and SDK leave a gap of at least that much between one holder's
// loss and the next grant; the margin absorbs clock-rate differences and
// the scheduling delay of noticing a cancelled Context.
//
// Holder processes are not in it: their Context lives on their own clock,
// and a SIGSTOPped holder reports its loss only after SIGCONT, so the time
// the chaos process would record is not when the holder stopped believing
// it held. Their grants are checked by (a) and (b).
func CheckIntervals(ivs []Interval, margin time.Duration) (int, []Violation) {
	byLock := map[string][]Interval{}
	for _, iv := range ivs {
		byLock[iv.Lock] = append(byLock[iv.Lock], iv)
	}
	var vs []Violation
	for _, lock := range slices.Sorted(maps.Keys(byLock)) {
		l := byLock[lock]
		sort.Slice(l, func(i, j int) bool { return l[i].Start < l[j].Start })
		for i, a := range l {
			for _, b := range l[i+1:] {
				if b.Start >= a.End {
					break
				}
				if a.Mode != api.LockExclusive && b.Mode != api.LockExclusive {
					continue
				}
				if overlap := min(a.End, b.End) - b.Start; overlap > margin {
					vs = append(vs, Violation{"intervals", fmt.Sprintf("%s: %s held %s [%v, %v] and %s held %s [%v, %v]: both live for %v (margin %v)",
						lock, a.Worker, a.Node, ms(a.Start), ms(a.End), b.Worker, b.Node, ms(b.Start), ms(b.End), ms(overlap), margin)})
				}
			}
		}
	}
	return len(ivs), vs
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
