package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// startHostile makes the hostile tenant's tenants and reads the state
// checker h2 compares against at the end.
func startHostile(e *env, admin *sdk.Client, lockds, proxies, keys []string) (*hostile, check.ClusterState, error) {
	hs := newHostile(e, lockds, proxies)
	ctx, cancel := e.callCtx()
	defer cancel()
	if err := hs.setup(ctx, admin); err != nil {
		return nil, check.ClusterState{}, fmt.Errorf("hostile tenant: %w", err)
	}
	before, err := clusterState(ctx, lockds, e.adminToken, keys)
	if err != nil {
		return nil, before, fmt.Errorf("hostile tenant: the state before: %w", err)
	}
	e.logf("chaos: hostile tenant %s ready (tenants %v)", hostileTenant, before.Tenants)
	return hs, before, nil
}

// stallKinds are the workloads' writes checker h3 bounds.
var stallKinds = map[string]bool{"config-put": true, "config-cas": true, "acked-put": true, "unlock": true, "resign": true}

// hostileFigures runs checker h3 and fills in what the hostile tenant
// did and what it cost the workloads' writes.
//
// h3 excuses the time the cell committed nothing (outages: demo's for
// the demo workloads, the moving prefix's own for its workers) and, for
// writes of cached nodes (config), the longest span shared with one
// fence (a leader fault to one cache window past the new leader's first
// commit; expire-in-flight's slow disks on every replica, a leader fault
// of every cell, to one past the first commit once they are whole again:
// diskFence): the new leader's fence holds them that long by design. One
// fence at most: a write held longer is a stall, whoever holds it.
//
// The bound is one cache window (what a cacher that never answers may
// hold a write) or one SDK attempt (what a request sent to a replica that
// froze costs before the SDK tries another), the longer, plus stallSlack.
// The moving prefix's workers are also excused the restores of its cell
// (a rolling restart of its lockds, by design: restores), which the
// probes, on the demo cell, do not see.
func (r *Report) hostileFigures(e *env, hs *hostile, ops []check.Op, out cellOutages, fences, restores []check.Window) {
	outages := out.demo
	r.Hostile = hs.Counts()
	windows := hs.Windows()
	r.HostileWindows = len(windows)
	var direct, proxied []check.Op
	for _, o := range ops {
		switch {
		case !stallKinds[o.Kind]:
		case e.viaProxy(o.Worker):
			proxied = append(proxied, o)
		default:
			direct = append(direct, o)
		}
	}
	bound := max(api.CacheWindowFor(e.cfg.Lease), cmp.Or(e.cfg.RequestTimeout, sdk.DefaultRequestTimeout)) + stallSlack
	r.StallBoundMS = bound.Milliseconds()
	var config, sideConfig, other []check.Op
	for _, o := range direct {
		switch {
		case strings.HasPrefix(o.Kind, "config-") && strings.HasPrefix(o.Worker, "side-"):
			sideConfig = append(sideConfig, o)
		case strings.HasPrefix(o.Kind, "config-"):
			config = append(config, o)
		default:
			other = append(other, o)
		}
	}
	n1, v1 := check.CheckWriteStalls(other, outages, bound)
	n2, v2 := check.CheckFencedWriteStalls(config, outages, fences, bound)
	n3, v3 := check.CheckFencedWriteStalls(sideConfig, append(slices.Clone(out.side), restores...), fences, bound)
	r.check("h3. hostile: no direct write stalled past its bound")(n1+n2+n3, append(append(v1, v2...), v3...))
	r.SlowestWrites = slowestWrites(direct, windows, outages, 5)
	r.WriteLatency = map[string]check.Latencies{}
	r.WriteLatency["direct, attack"], r.WriteLatency["direct, no attack"] = check.SplitLatencies(direct, windows)
	r.WriteLatency["proxy, attack"], r.WriteLatency["proxy, no attack"] = check.SplitLatencies(proxied, windows)
	hs.mu.Lock()
	r.HostileFigures, r.HostileCacheable, r.HostileInvalidations = hs.figures, hs.cacheable, hs.invalidations
	hs.mu.Unlock()
}

// cellOutages are the periods in which the probes of demo, and of the
// moving prefix (on whichever cell serves it), saw no commit.
type cellOutages struct{ demo, side []check.Window }

// slowestWrites describes the n slowest of writes: kind, latency, and
// whether an attack window or an outage overlapped it.
func slowestWrites(writes []check.Op, windows, outages []check.Window, n int) []string {
	ws := slices.Clone(writes)
	slices.SortFunc(ws, func(a, b check.Op) int { return int((b.End - b.Start) - (a.End - a.Start)) })
	var out []string
	for _, o := range ws[:min(n, len(ws))] {
		over := func(list []check.Window) bool {
			return slices.ContainsFunc(list, func(w check.Window) bool { return w.Start < o.End && o.Start < w.End })
		}
		out = append(out, fmt.Sprintf("%s %s %v at %v (ok=%v, attack=%v, outage=%v)", o.Worker, o.Kind,
			(o.End-o.Start).Round(time.Millisecond), o.Start.Round(time.Second), o.OK, over(windows), over(outages)))
	}
	return out
}

// hostileSummary is the hostile tenant's part of the readable report.
func (r *Report) hostileSummary(b *strings.Builder) {
	if r.Hostile == nil {
		return
	}
	total := 0
	for _, c := range r.Hostile {
		total += c.Attempts
	}
	fmt.Fprintf(b, "hostile tenant %s: %d requests; %d cache-block windows: %d cached gets made cacheable, up to %d invalidations held unacknowledged in one reply\n",
		hostileTenant, total, r.HostileWindows, r.HostileCacheable, r.HostileInvalidations)
	fmt.Fprintf(b, "  %-28s %8s %8s %6s %6s %9s  %s\n", "kind", "attempts", "refused", "2xx", "other", "no answer", "by status")
	for _, k := range slices.Sorted(maps.Keys(r.Hostile)) {
		c := r.Hostile[k]
		var st []string
		for _, s := range slices.Sorted(maps.Keys(c.Statuses)) {
			st = append(st, fmt.Sprintf("%d:%d", s, c.Statuses[s]))
		}
		fmt.Fprintf(b, "  %-28s %8d %8d %6d %6d %9d  %s\n", k, c.Attempts, c.Refused, c.OK, c.Other, c.NoAnswer, strings.Join(st, " "))
	}
	f := r.HostileFigures
	fmt.Fprintf(b, "  proxies: goroutines %.0f at the start, %.0f at most; RSS %.1f MB, %.1f MB at most\n", f.ProxyGoroutinesStart, f.ProxyGoroutinesMax, f.ProxyRSSMBStart, f.ProxyRSSMBMax)
	fmt.Fprintf(b, "  /metrics: a lockd's %.0f KB, %.0f KB at most; a proxy's %.0f KB, %.0f KB at most\n", f.LockdMetricsKBStart, f.LockdMetricsKBMax, f.ProxyMetricsKBStart, f.ProxyMetricsKBMax)
	fmt.Fprintf(b, "  planned leadership hand-overs (leader balancing, clean stops), sampled every 5 s: %.0f moved, %.0f did not\n", f.HandOvers, f.HandOversFailed)
	fmt.Fprintf(b, "  workload write latency (bound for a direct write outside outages: %d ms):\n", r.StallBoundMS)
	for _, k := range slices.Sorted(maps.Keys(r.WriteLatency)) {
		fmt.Fprintf(b, "    %-20s %s\n", k, r.WriteLatency[k])
	}
	fmt.Fprintf(b, "  slowest direct writes: %s\n", strings.Join(r.SlowestWrites, "; "))
}

// hostileAttempts are the attempts by kind, for the JSON line.
func (r *Report) hostileAttempts() map[string]int {
	if r.Hostile == nil {
		return nil
	}
	out := map[string]int{}
	for k, c := range r.Hostile {
		out[k] = c.Attempts
	}
	return out
}

// hostileViolations are the violations of the hostile checkers (h1-h3);
// nil if the hostile tenant did not run.
func (r *Report) hostileViolations() *int {
	if r.Hostile == nil {
		return nil
	}
	n := 0
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Name, "h") && len(c.Name) > 2 && c.Name[2] == '.' {
			n += len(c.Violations)
		}
	}
	return &n
}
