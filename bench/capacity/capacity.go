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

	// The figures below are measured by a lockbench run; 0 plans with the
	// spec's rule of thumb instead.

	// AcquiresPerSec is the Lock+Unlock rate one cell sustained (acquire
	// scenario); 0 counts each acquire as two writes of WritesPerSec.
	AcquiresPerSec float64
	// KeepAliveEvery is the seconds between one session's KeepAlives as
	// the cell saw them (sessions scenario: sessions ÷ KeepAlives/s).
	KeepAliveEvery float64
	// LeaderCPUPctPerKeepAlive is the leader's CPU (% of a core) per
	// KeepAlive/s it answered (sessions scenario).
	LeaderCPUPctPerKeepAlive float64
	// SessionsPerProxy is the sessions one proxy renews within
	// ProxyCPUBudgetPct of a core (proxy scenario, SessionsPerProxyAt).
	SessionsPerProxy float64
	// ProxyKeepAlivesPerSec is the KeepAlive RPCs one proxy sent a
	// cell's leader per second (proxy scenario).
	ProxyKeepAlivesPerSec float64
}

// ProxyCPUBudgetPct is the share of a core a proxy is planned to use
// renewing sessions (the rest serves the locks and reads it forwards).
const ProxyCPUBudgetPct = 50.0

// SpecRegion is the spec's region (lock-service-design.txt): 50 000
// sessions, about 83 acquires and 34 other writes a second, three zones.
var SpecRegion = Target{Sessions: 50_000, LocksPerSec: 83, WritesPerS: 34, Zones: 3}

// SessionsPerProxyAt is the sessions one proxy can renew within
// ProxyCPUBudgetPct of a core, from a measurement: sessions renewed
// through proxies that used cpuPct of a core each. 0 if it cannot tell.
func SessionsPerProxyAt(sessions, proxies int, cpuPct float64) float64 {
	if sessions <= 0 || proxies <= 0 || cpuPct <= 0 {
		return 0
	}
	return float64(sessions) / float64(proxies) * ProxyCPUBudgetPct / cpuPct
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
	// DirectLeaderCPUPct is each leader's CPU (% of a core) for the
	// direct KeepAlives, when the CPU per KeepAlive was measured.
	DirectLeaderCPUPct float64
	Reasoning          []string
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
	byWrites := cellsByLoad(t, m, perCell, say)
	bySessions := int(math.Ceil(float64(t.Sessions) / SessionsPerCellMax))
	p.Cells = max(byWrites, bySessions, 1)
	say("cells = max(%d by load, ⌈%d / %d⌉ = %d by sessions, 1) = %d", byWrites, t.Sessions, SessionsPerCellMax, bySessions, p.Cells)
	p.Replicas = p.Cells * ReplicasPerCell
	say("replicas = %d cells × %d = %d, two in each of two zones and one in a third per cell", p.Cells, ReplicasPerCell, p.Replicas)
	p.Proxies = proxiesFor(t, m, say)
	keepAlives(&p, t, m, say)
	return p, nil
}

// cellsByLoad is the cells the target's writes need. With a measured
// acquire rate, a cell's share of the load is its acquires over what it
// sustained plus its other writes over its planned writes; without, every
// acquire is two writes. Never fewer than the blast radius allows.
func cellsByLoad(t Target, m PerCell, perCell float64, say func(string, ...any)) int {
	writes := 2*t.LocksPerSec + t.WritesPerS
	if m.AcquiresPerSec <= 0 {
		n := int(math.Ceil(writes / perCell))
		say("cells by writes = ⌈%.0f / %.0f⌉ = %d", writes, perCell, n)
		return n
	}
	acq := m.AcquiresPerSec * m.Headroom
	load := t.LocksPerSec/acq + t.WritesPerS/perCell
	byLoad := int(math.Ceil(load))
	byBlast := int(math.Ceil(writes / WritesPerCellBlast))
	say("cells by load = ⌈%.0f acquires/s / (%.0f measured × %.0f %%) + %.0f writes/s / %.0f⌉ = ⌈%.3f⌉ = %d; by blast radius ⌈%.0f / %d⌉ = %d",
		t.LocksPerSec, m.AcquiresPerSec, 100*m.Headroom, t.WritesPerS, perCell, load, byLoad, writes, WritesPerCellBlast, byBlast)
	return max(byLoad, byBlast)
}

// proxiesFor is the proxies the target's sessions need: by the measured
// sessions a proxy renews within its CPU budget, or the spec's figure; at
// least one per zone, and a multiple of the zones so that losing one zone
// moves an equal share.
func proxiesFor(t Target, m PerCell, say func(string, ...any)) int {
	per, from := float64(SessionsPerProxy), "the spec's"
	if m.SessionsPerProxy > 0 {
		per, from = m.SessionsPerProxy, fmt.Sprintf("measured, at %.0f %% of a core", ProxyCPUBudgetPct)
	}
	proxies := max(int(math.Ceil(float64(t.Sessions)/per)), t.Zones)
	if r := proxies % t.Zones; r != 0 {
		proxies += t.Zones - r
	}
	say("proxies = ⌈%d sessions / %.0f per proxy (%s)⌉, at least one per zone, rounded up to a multiple of %d zones = %d", t.Sessions, per, from, t.Zones, proxies)
	return proxies
}

// keepAlives fills in what each leader receives: direct, and batched
// through the proxies, with the measured rates where there are some.
func keepAlives(p *Plan, t Target, m PerCell, say func(string, ...any)) {
	every, perProxy := KeepAliveEvery, ProxyKeepAlivesPerSec
	if m.KeepAliveEvery > 0 {
		every = m.KeepAliveEvery
	}
	if m.ProxyKeepAlivesPerSec > 0 {
		perProxy = m.ProxyKeepAlivesPerSec
	}
	p.DirectKeepAlivesPerSec = float64(t.Sessions) / every / float64(p.Cells)
	p.LeaderKeepAlivesPerSec = float64(p.Proxies) * perProxy
	say("each leader: %.0f KeepAlives/s direct (%d sessions / %.2f s / %d cells), %.0f/s batched through the proxies (%d × %.2f)",
		p.DirectKeepAlivesPerSec, t.Sessions, every, p.Cells, p.LeaderKeepAlivesPerSec, p.Proxies, perProxy)
	if m.LeaderCPUPctPerKeepAlive > 0 {
		p.DirectLeaderCPUPct = p.DirectKeepAlivesPerSec * m.LeaderCPUPctPerKeepAlive
		say("each leader's CPU for direct KeepAlives: %.0f/s × %.4f %% per KeepAlive/s (measured) = %.0f %% of a core", p.DirectKeepAlivesPerSec, m.LeaderCPUPctPerKeepAlive, p.DirectLeaderCPUPct)
	}
}
