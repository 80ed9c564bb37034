package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockservice/lockd/bench/capacity"
	"github.com/lockservice/lockd/bench/report"
)

// specCellWrites is the spec's writes per cell, used when a run measured
// none.
const specCellWrites = 10_000

// The smallest cases whose CPU figures a plan extrapolates from: below
// them fixed costs dominate (100 sessions through a proxy cost it as much
// CPU per second as thousands would).
const (
	minSessionsForCPU      = 1_000
	minProxySessionsForCPU = 10_000
)

// measuredPerCell reads a run's own figures into per-cell figures: the
// best per-cell writes rate (writes), the best Lock+Unlock rate on
// distinct locks (acquire), the KeepAlive interval and the leader's CPU
// per KeepAlive (sessions), the sessions a proxy renews within its CPU
// budget and its batches per second (proxy, the largest case). inputs
// says which were found, for the plan's reader; a figure not measured
// stays 0 (Compute then uses the spec's).
func measuredPerCell(r *report.Run, headroom float64) (per capacity.PerCell, inputs []string) {
	per.Headroom = headroom
	var proxySessions int
	for _, res := range r.Results {
		switch {
		case res.Scenario == "writes" && res.Params["prefix"] != "":
			per.WritesPerSec = max(per.WritesPerSec, res.Summary.Rate)
		case res.Scenario == "acquire" && res.Params["locks"] == "distinct":
			per.AcquiresPerSec = max(per.AcquiresPerSec, res.Summary.Rate)
		case res.Scenario == "sessions":
			sessionFigures(res, &per)
		case res.Scenario == "proxy" && res.Params["sessions"] != "":
			if n, _ := strconv.Atoi(res.Params["sessions"]); n > proxySessions && proxyFigures(res, &per) {
				proxySessions = n
			}
		}
	}
	if per.WritesPerSec == 0 {
		per.WritesPerSec = specCellWrites
		inputs = append(inputs, fmt.Sprintf("writes per cell: none measured, the spec's %d/s", specCellWrites))
	} else {
		inputs = append(inputs, fmt.Sprintf("writes per cell: %.0f/s (writes, best cell)", per.WritesPerSec))
	}
	if per.AcquiresPerSec > 0 {
		inputs = append(inputs, fmt.Sprintf("Lock+Unlock per cell: %.0f/s (acquire, distinct locks, best)", per.AcquiresPerSec))
	}
	if per.KeepAliveEvery > 0 {
		inputs = append(inputs, fmt.Sprintf("one KeepAlive per session every %.2f s at the cell (sessions)", per.KeepAliveEvery))
	}
	if per.LeaderCPUPctPerKeepAlive > 0 {
		inputs = append(inputs, fmt.Sprintf("leader CPU %.4f %% of a core per KeepAlive/s (sessions, busiest replica)", per.LeaderCPUPctPerKeepAlive))
	}
	if per.SessionsPerProxy > 0 {
		inputs = append(inputs, fmt.Sprintf("%.0f sessions per proxy within %.0f %% of a core, %.2f KeepAlive RPCs per proxy per second at the leader (proxy, %d sessions)",
			per.SessionsPerProxy, capacity.ProxyCPUBudgetPct, per.ProxyKeepAlivesPerSec, proxySessions))
	}
	return per, inputs
}

// sessionFigures reads the sessions scenario: sessions held over
// KeepAlives/s at the cell is the interval; the busiest replica's CPU (the
// leader answers the KeepAlives) per KeepAlive/s, from a case large
// enough to extrapolate from.
func sessionFigures(res report.Result, per *capacity.PerCell) {
	n, _ := strconv.Atoi(res.Params["sessions"])
	ka := res.Extra["keepalives_per_s"]
	if n <= 0 || ka <= 0 {
		return
	}
	per.KeepAliveEvery = float64(n) / ka
	busiest := 0.0
	for k, v := range res.Extra {
		if strings.HasPrefix(k, "cpu_pct_replica") {
			busiest = max(busiest, v)
		}
	}
	if busiest > 0 && n >= minSessionsForCPU {
		per.LeaderCPUPctPerKeepAlive = busiest / ka
	}
}

// proxyFigures reads one proxy case (n sessions through p proxies): the
// proxies' mean CPU gives the sessions per proxy within the budget; the
// leader's KeepAlive RPCs per proxy. false if the case has no CPU figure
// or is too small to extrapolate from.
func proxyFigures(res report.Result, per *capacity.PerCell) bool {
	n, _ := strconv.Atoi(res.Params["sessions"])
	p, _ := strconv.Atoi(res.Params["proxies"])
	var sum float64
	var k int
	for name, v := range res.Extra {
		if strings.HasPrefix(name, "proxy") && strings.HasSuffix(name, "_cpu_pct") {
			sum, k = sum+v, k+1
		}
	}
	if k == 0 || p <= 0 || n < minProxySessionsForCPU {
		return false
	}
	per.SessionsPerProxy = capacity.SessionsPerProxyAt(n, p, sum/float64(k))
	per.ProxyKeepAlivesPerSec = res.Extra["leader_keepalive_rpcs_per_s"] / float64(p)
	return per.SessionsPerProxy > 0
}

// defaultHeadroom is the share of a cell's measured figures a plan uses.
const defaultHeadroom = 0.5

// runCapacityPlan is the capacity plan for the spec's region from the
// run's own figures, for its report; nil if it cannot be computed.
func runCapacityPlan(r *report.Run) *report.CapacityPlan {
	per, inputs := measuredPerCell(r, defaultHeadroom)
	t := capacity.SpecRegion
	p, err := capacity.Compute(t, per)
	if err != nil {
		return nil
	}
	return &report.CapacityPlan{
		Target: fmt.Sprintf("the spec's region: %d sessions, %.0f acquires/s, %.0f other writes/s, %d zones, %.0f %% headroom",
			t.Sessions, t.LocksPerSec, t.WritesPerS, t.Zones, 100*defaultHeadroom),
		Inputs: inputs, Reasoning: p.Reasoning,
		Result: fmt.Sprintf("%d cells, %d replicas, %d proxies", p.Cells, p.Replicas, p.Proxies)}
}
