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
