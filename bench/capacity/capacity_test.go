package capacity

import "testing"

func TestCompute(t *testing.T) {
	spec := PerCell{WritesPerSec: 10_000, Headroom: 0.5}
	for _, tc := range []struct {
		name                     string
		target                   Target
		per                      PerCell
		cells, replicas, proxies int
		writes, direct, leader   float64
	}{
		// The spec's region: 50 k sessions, ~83 acquires/s, ~34 other
		// writes/s: one cell, 25 proxies (27 over three zones), 12.5 k
		// KeepAlives/s direct or 27 batched.
		{"spec region", Target{Sessions: 50_000, LocksPerSec: 83, WritesPerS: 34, Zones: 3}, spec, 1, 5, 27, 200, 12_500, 27},
		{"mass restart peak", Target{Sessions: 50_000, LocksPerSec: 1000, WritesPerS: 0, Zones: 3}, spec, 1, 5, 27, 2000, 12_500, 27},
		{"past blast radius", Target{Sessions: 10_000, LocksPerSec: 2000, WritesPerS: 1000, Zones: 3}, spec, 3, 15, 6, 5000, 2500 / 3.0, 6},
		{"by sessions", Target{Sessions: 250_000, Zones: 3}, spec, 3, 15, 126, 0, 250_000 / 4.0 / 3, 126},
		{"slow machine", Target{Sessions: 1000, LocksPerSec: 500, Zones: 4}, PerCell{WritesPerSec: 1_000}, 2, 10, 4, 1000, 125, 4},
		{"empty", Target{Zones: 3}, spec, 1, 5, 3, 0, 0, 3},
	} {
		p, err := Compute(tc.target, tc.per)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if p.Cells != tc.cells || p.Replicas != tc.replicas || p.Proxies != tc.proxies {
			t.Errorf("%s: %d cells, %d replicas, %d proxies; want %d, %d, %d\n%v", tc.name, p.Cells, p.Replicas, p.Proxies, tc.cells, tc.replicas, tc.proxies, p.Reasoning)
		}
		if p.WritesPerSec != tc.writes || p.DirectKeepAlivesPerSec != tc.direct || p.LeaderKeepAlivesPerSec != tc.leader {
			t.Errorf("%s: writes %v, direct KA %v, leader KA %v; want %v, %v, %v", tc.name, p.WritesPerSec, p.DirectKeepAlivesPerSec, p.LeaderKeepAlivesPerSec, tc.writes, tc.direct, tc.leader)
		}
		if len(p.Reasoning) < 5 {
			t.Errorf("%s: reasoning %v", tc.name, p.Reasoning)
		}
	}
	for _, bad := range []struct {
		t Target
		m PerCell
	}{
		{Target{Zones: 2}, spec},
		{Target{Sessions: -1, Zones: 3}, spec},
		{Target{Zones: 3}, PerCell{}},
	} {
		if _, err := Compute(bad.t, bad.m); err == nil {
			t.Errorf("Compute(%+v, %+v): no error", bad.t, bad.m)
		}
	}
}

// Measured figures replace the spec's: the acquire rate a cell sustained,
// the KeepAlive interval and CPU per KeepAlive at the cell, the sessions
// a proxy renews within its CPU budget and its batches per second.
func TestComputeFromMeasuredFigures(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		target                    Target
		per                       PerCell
		cells, proxies            int
		direct, leader, directCPU float64
	}{
		// 2 016 acquires/s and 6 000 writes/s measured: the spec's region
		// is 83 / 1 008 + 34 / 2 000 of one cell.
		{"spec region, this machine", SpecRegion, PerCell{WritesPerSec: 6000, Headroom: 0.5, AcquiresPerSec: 2016}, 1, 27, 12_500, 27, 0},
		// 1 000 acquires/s at 50 %: 900 acquires/s need ⌈900/500 + 100/500⌉ = 2 cells.
		{"acquire-bound", Target{Sessions: 1000, LocksPerSec: 900, WritesPerS: 100, Zones: 3}, PerCell{WritesPerSec: 1000, AcquiresPerSec: 1000}, 2, 3, 125, 3, 0},
		// Still split at the blast radius: 3 000 writes/s > 2 000.
		{"blast radius", Target{LocksPerSec: 1000, WritesPerS: 1000, Zones: 3}, PerCell{WritesPerSec: 100_000, AcquiresPerSec: 100_000}, 2, 3, 0, 3, 0},
		// 50 000 through 2 proxies at 32 % each: 39 062 per proxy at 50 %
		// → 2 proxies, 3 for the zones; 0.5 batches/s per proxy measured;
		// KeepAlives every 3 s at 0.004 % of a core each.
		{"proxy and sessions measured", SpecRegion, PerCell{WritesPerSec: 6000, SessionsPerProxy: SessionsPerProxyAt(50_000, 2, 32),
			ProxyKeepAlivesPerSec: 0.5, KeepAliveEvery: 3, LeaderCPUPctPerKeepAlive: 0.004}, 1, 3, 50_000 / 3.0, 1.5, 50_000 / 3.0 * 0.004},
	} {
		p, err := Compute(tc.target, tc.per)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if p.Cells != tc.cells || p.Proxies != tc.proxies || p.DirectKeepAlivesPerSec != tc.direct || p.LeaderKeepAlivesPerSec != tc.leader || p.DirectLeaderCPUPct != tc.directCPU {
			t.Errorf("%s: %d cells, %d proxies, direct %v, leader %v, cpu %v; want %d, %d, %v, %v, %v\n%v", tc.name,
				p.Cells, p.Proxies, p.DirectKeepAlivesPerSec, p.LeaderKeepAlivesPerSec, p.DirectLeaderCPUPct,
				tc.cells, tc.proxies, tc.direct, tc.leader, tc.directCPU, p.Reasoning)
		}
	}
	for _, tc := range []struct {
		sessions, proxies int
		cpu, want         float64
	}{{50_000, 2, 32, 39_062.5}, {10_000, 1, 50, 10_000}, {0, 2, 10, 0}, {100, 0, 10, 0}, {100, 1, 0, 0}} {
		if got := SessionsPerProxyAt(tc.sessions, tc.proxies, tc.cpu); got != tc.want {
			t.Errorf("SessionsPerProxyAt(%d, %d, %v) = %v, want %v", tc.sessions, tc.proxies, tc.cpu, got, tc.want)
		}
	}
}
