package check

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/lockservice/lockd/api"
)

// CheckSemaphores is checker s, for each semaphore lock (permits: its N):
//
//   - at most N holders at any instant, in real time: the intervals in
//     which a client's permit Context was live (Interval, Mode
//     api.LockPermit, on the chaos process's one monotonic clock), each
//     cut short by margin at its end as CheckIntervals allows an overlap
//     of margin (the SDK's DriftMargin), never overlap N+1 deep;
//   - tokens rising: a permit asked for after another's Release returned
//     (its node created after that node's delete committed) has a higher
//     token; and no token is granted to two nodes.
//
// It returns the number of permits and intervals checked.
func CheckSemaphores(ivs []Interval, grants []PermitGrant, permits map[string]int, margin time.Duration) (int, []Violation) {
	vs := &violationList{checker: "semaphore"}
	checked := 0
	for _, lock := range slices.Sorted(maps.Keys(permits)) {
		var mine []Interval
		for _, iv := range ivs {
			if iv.Lock == lock && iv.Mode == api.LockPermit {
				mine = append(mine, iv)
			}
		}
		var gs []PermitGrant
		for _, g := range grants {
			if g.Lock == lock {
				gs = append(gs, g)
			}
		}
		checked += len(mine) + len(gs)
		checkPermitDepth(lock, permits[lock], mine, margin, vs)
		checkPermitTokens(lock, gs, vs)
	}
	return checked, vs.list
}

// permitEdge is an interval's start (+1) or its cut-short end (-1).
type permitEdge struct {
	at    time.Duration
	delta int
	iv    int // index in the lock's intervals
}

// checkPermitDepth sweeps the lock's intervals, each cut short by margin,
// and reports every episode in which more than n were live at once (at
// most MaxDetails spelled out).
func checkPermitDepth(lock string, n int, ivs []Interval, margin time.Duration, vs *violationList) {
	var edges []permitEdge
	for i, iv := range ivs {
		if end := iv.End - margin; end > iv.Start {
			edges = append(edges, permitEdge{iv.Start, +1, i}, permitEdge{end, -1, i})
		}
	}
	// At one instant an end comes before a start: touching is no overlap.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
	live := map[int]bool{}
	episodes := 0
	for _, e := range edges {
		if e.delta < 0 {
			delete(live, e.iv)
			continue
		}
		live[e.iv] = true
		if len(live) != n+1 {
			continue // an episode is reported once, as it begins
		}
		if episodes++; episodes <= MaxDetails {
			var who []string
			for _, i := range slices.Sorted(maps.Keys(live)) {
				who = append(who, ivs[i].Worker+" "+api.Base(ivs[i].Node)+" from "+ms(ivs[i].Start).String()+" to "+ms(ivs[i].End).String())
			}
			vs.add("%s: %d permit holders live at %v, at most %d (margin %v): %v", lock, len(live), ms(e.at), n, margin, who)
		}
	}
	if episodes > MaxDetails {
		vs.add("%s: %d more episodes of more than %d holders", lock, episodes-MaxDetails, n)
	}
}

// checkPermitTokens reports a permit whose token is not above that of
// one whose Release returned before it was asked for, and a token
// granted to two nodes.
func checkPermitTokens(lock string, gs []PermitGrant, vs *violationList) {
	byToken := map[uint64]string{}
	var released []PermitGrant
	for _, g := range gs {
		if other, ok := byToken[g.Token]; ok && other != g.Node {
			vs.add("%s: token %d granted to %s and %s", lock, g.Token, other, g.Node)
		}
		byToken[g.Token] = g.Node
		if g.Released > 0 {
			released = append(released, g)
		}
	}
	sort.Slice(released, func(i, j int) bool { return released[i].Released < released[j].Released })
	// best[i] is the grant of highest token among released[:i+1].
	best := make([]int, len(released))
	for i := range released {
		best[i] = i
		if i > 0 && released[best[i-1]].Token > released[i].Token {
			best[i] = best[i-1]
		}
	}
	bad := 0
	for _, g := range gs {
		k := sort.Search(len(released), func(i int) bool { return released[i].Released >= g.Asked })
		if k == 0 {
			continue
		}
		if a := released[best[k-1]]; g.Token <= a.Token {
			if bad++; bad <= MaxDetails {
				vs.add("%s: %s's permit %s (token %d), asked for at %v, is not above %s's %s (token %d), released at %v",
					lock, g.Worker, api.Base(g.Node), g.Token, ms(g.Asked), a.Worker, api.Base(a.Node), a.Token, ms(a.Released))
			}
		}
	}
	if bad > MaxDetails {
		vs.add("%s: %d more permits with tokens not rising", lock, bad-MaxDetails)
	}
}
