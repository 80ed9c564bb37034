// Package capacity turns a target load into the cells, replicas and proxies
// that serve it, from per-cell figures lockbench measured (or the spec's),
// and shows its reasoning line by line. It is pure arithmetic.
package capacity

import (
	"fmt"
	"math"
)

// Target is the load a region must carry.
type Target struct {
	Sessions    int     // live client sessions
	LocksPerSec float64 // lock acquisitions per second (each is a create and a delete)
	WritesPerS  float64 // other writes per second (config puts, session opens and expiries)
	Zones       int     // availability zones (at least 3: a cell survives losing one)
}

// PerCell is what one cell sustains, as measured.
type PerCell struct {
	WritesPerSec float64 // committed small writes per second at saturation
	// Headroom is the fraction of WritesPerSec a cell is planned to use
	// (the rest absorbs mass restarts and fail-over catch-up).
	Headroom float64
}

// Spec's rules of thumb (lock-service-design.txt).
const (
	ReplicasPerCell       = 5     // 2 + 2 + 1 over three zones
	SessionsPerProxy      = 2_000 // client connections one proxy terminates
	SessionsPerCellMax    = 100_000
	WritesPerCellBlast    = 2_000 // sustained writes at which a cell is split for blast radius
	KeepAliveEvery        = 4.0   // seconds between a client's KeepAlives (lease/3)
	ProxyKeepAlivesPerSec = 1.0   // batched KeepAlive RPCs per proxy per second
)

// Plan is the deployment a target needs.
type Plan struct {
	Cells, Replicas, Proxies int
	// LeaderKeepAlivesPerSec is what each cell's leader receives, through
	// the proxies; DirectKeepAlivesPerSec what it would without them.
	LeaderKeepAlivesPerSec, DirectKeepAlivesPerSec float64
	WritesPerSec                                   float64 // consensus writes per second, all cells
	Reasoning                                      []string
}

// Compute sizes a deployment for t from per-cell figures m.
func Compute(t Target, m PerCell) (Plan, error) {
	switch {
	case t.Sessions < 0 || t.LocksPerSec < 0 || t.WritesPerS < 0:
		return Plan{}, fmt.Errorf("capacity: negative target")
	case t.Zones < 3:
		return Plan{}, fmt.Errorf("capacity: %d zones: a five-replica cell needs three (2 + 2 + 1) to survive losing one", t.Zones)
	case m.WritesPerSec <= 0:
		return Plan{}, fmt.Errorf("capacity: no measured writes per cell")
	}
	if m.Headroom <= 0 || m.Headroom > 1 {
		m.Headroom = 0.5
	}
	var p Plan
	say := func(format string, args ...any) { p.Reasoning = append(p.Reasoning, fmt.Sprintf(format, args...)) }

	p.WritesPerSec = 2*t.LocksPerSec + t.WritesPerS
	say("writes through consensus: 2 × %.0f acquires/s (create + delete) + %.0f other = %.0f/s", t.LocksPerSec, t.WritesPerS, p.WritesPerSec)
	perCell := math.Min(m.WritesPerSec*m.Headroom, WritesPerCellBlast)
	say("one cell is planned at min(%.0f measured × %.0f %% headroom, %d for blast radius) = %.0f writes/s", m.WritesPerSec, 100*m.Headroom, WritesPerCellBlast, perCell)
	byWrites := int(math.Ceil(p.WritesPerSec / perCell))
	bySessions := int(math.Ceil(float64(t.Sessions) / SessionsPerCellMax))
	p.Cells = max(byWrites, bySessions, 1)
	say("cells = max(⌈%.0f / %.0f⌉ = %d by writes, ⌈%d / %d⌉ = %d by sessions, 1) = %d", p.WritesPerSec, perCell, byWrites, t.Sessions, SessionsPerCellMax, bySessions, p.Cells)
	p.Replicas = p.Cells * ReplicasPerCell
	say("replicas = %d cells × %d = %d, two in each of two zones and one in a third per cell", p.Cells, ReplicasPerCell, p.Replicas)

	proxies := int(math.Ceil(float64(t.Sessions) / SessionsPerProxy))
	// At least one per zone, and a multiple of the zones so that losing
	// one zone moves an equal share.
	proxies = max(proxies, t.Zones)
	if r := proxies % t.Zones; r != 0 {
		proxies += t.Zones - r
	}
	p.Proxies = proxies
	say("proxies = ⌈%d sessions / %d per proxy⌉, at least one per zone, rounded up to a multiple of %d zones = %d", t.Sessions, SessionsPerProxy, t.Zones, p.Proxies)
	p.DirectKeepAlivesPerSec = float64(t.Sessions) / KeepAliveEvery / float64(p.Cells)
	p.LeaderKeepAlivesPerSec = float64(p.Proxies) * ProxyKeepAlivesPerSec
	say("each leader: %.0f KeepAlives/s direct (%d sessions / %.0f s / %d cells), %.0f/s batched through the proxies", p.DirectKeepAlivesPerSec, t.Sessions, KeepAliveEvery, p.Cells, p.LeaderKeepAlivesPerSec)
	return p, nil
}
