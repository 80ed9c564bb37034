package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockservice/lockd/tests/chaos/check"
)

// Stats are the min, median and max of samples, in milliseconds.
type Stats struct {
	Min    int64 `json:"min"`
	Median int64 `json:"median"`
	Max    int64 `json:"max"`
	N      int   `json:"-"`
}

func statsOf(samples []Sample) Stats {
	if len(samples) == 0 {
		return Stats{}
	}
	ms := make([]float64, len(samples))
	for i, s := range samples {
		ms[i] = float64(s.Dur) / float64(time.Millisecond)
	}
	sort.Float64s(ms)
	n := len(ms)
	med := ms[n/2]
	if n%2 == 0 {
		med = (ms[n/2-1] + ms[n/2]) / 2
	}
	return Stats{Min: int64(math.Round(ms[0])), Median: int64(math.Round(med)), Max: int64(math.Round(ms[n-1])), N: n}
}

func (s Stats) String() string {
	if s.N == 0 {
		return "no samples"
	}
	return fmt.Sprintf("n=%d  min %d ms, median %d ms, max %d ms", s.N, s.Min, s.Median, s.Max)
}

// CheckSummary is one checker's result.
type CheckSummary struct {
	Name       string
	Checked    int
	Violations []check.Violation
}

// Report is what a run found and measured.
type Report struct {
	Seed         int64
	DurationS    float64 // the fault phase
	Ops          int     // client calls recorded and checked
	Violations   int
	Failovers    int
	FailoverMS   Stats
	TakeoverMS   Stats
	SessionsLost int

	Network  string
	Proxies  int // lockproxies half the workers send through
	Steps    int
	Schedule []Step
	Faults   map[string]int // by step label
	// MoveOutcomes counts the move, restore and disk nemeses' outcomes
	// (both outcomes of a race are accepted: this says which happened).
	MoveOutcomes map[string]int
	// FsyncFaults says how the disk nemeses ran (the lockd_faults build).
	FsyncFaults string
	// Side counts the moving prefix's records: serve samples, writes,
	// config ops, lease claims, holds through a move.
	Side             map[string]int
	Checks           []CheckSummary
	Linearizable     string // porcupine's verdict: ok, illegal, unknown
	OpsByKind        map[string]int
	Grants           int
	AcceptedWrites   int
	Intervals        int // client hold intervals checked (Jepsen-style)
	Deletions        int // lock nodes whose deletion index was learned
	LockObservations int
	ConfigOps        int
	AckedWrites      int
	StaleRefused     int
	Jeopardies       int
	// ConfigCacheHits and ConfigCacheMisses: config gets answered from the
	// client cache, and sent to the cell.
	ConfigCacheHits, ConfigCacheMisses uint64
	// SessionsLostToOutages ended during an outage of at least a lease
	// (the cell committed nothing): not fail-over losses.
	SessionsLostToOutages int
	Outages               []string // periods of at least a lease without a commit
	// SideOutages are the moving prefix's periods of a second or more
	// without a probe's commit (checker h3 excuses them within faults).
	SideOutages    []string
	HealedS        float64 // faults stopped → every waiter granted
	RegainMS       Stats   // kill-three: majority back → first commit
	FailoverByKind map[string]Stats
	TakeoverByKind map[string]Stats
	Dir            string // data and logs, kept when a violation was found

	// Hostile counts the hostile tenant's requests by attack kind (nil:
	// it did not run); HostileWindows its cache-block attacks,
	// HostileCacheable its cached gets made cacheable, and
	// HostileInvalidations the most invalidations one reply carried
	// that it never acknowledged.
	Hostile              map[string]HostileCount
	HostileWindows       int
	HostileCacheable     int
	HostileInvalidations int
	HostileFigures       hostileFigures
	// WriteLatency: the workloads' writes (direct, through a proxy)
	// started during a cache-block attack, and the others.
	WriteLatency map[string]check.Latencies
	StallBoundMS int64 // checker h3's bound on a direct write
	// SlowestWrites are the slowest direct writes, described.
	SlowestWrites []string
	// Etcd counts the etcd workload's grants by kind and its sessions
	// ended by cause (workload_etcd.go; nil: it did not run).
	Etcd map[string]int

	failoverSamples, takeoverSamples, regainSamples []Sample
}

// check records a checker's result.
func (r *Report) check(name string) func(int, []check.Violation) {
	return func(checked int, vs []check.Violation) {
		r.Checks = append(r.Checks, CheckSummary{Name: name, Checked: checked, Violations: vs})
	}
}

func (r *Report) finish() {
	r.Violations = 0
	for _, c := range r.Checks {
		r.Violations += len(c.Violations)
	}
	r.Failovers = len(r.failoverSamples)
	r.FailoverMS = statsOf(r.failoverSamples)
	r.TakeoverMS = statsOf(r.takeoverSamples)
	r.RegainMS = statsOf(r.regainSamples)
	r.FailoverByKind = byKind(r.failoverSamples)
	r.TakeoverByKind = byKind(r.takeoverSamples)
}

func byKind(samples []Sample) map[string]Stats {
	m := map[string][]Sample{}
	for _, s := range samples {
		m[s.Kind] = append(m[s.Kind], s)
	}
	out := map[string]Stats{}
	for k, v := range m {
		out[k] = statsOf(v)
	}
	return out
}

// JSON is the one-line result `make chaos` ends with.
func (r *Report) JSON() string {
	line := struct {
		Seed         int64   `json:"seed"`
		DurationS    float64 `json:"duration_s"`
		Ops          int     `json:"ops"`
		Violations   int     `json:"violations"`
		Failovers    int     `json:"failovers"`
		FailoverMS   Stats   `json:"failover_ms"`
		TakeoverMS   Stats   `json:"takeover_ms"`
		SessionsLost int     `json:"sessions_lost"`
		// Intervals is the number of client hold intervals the real-time
		// mutual-exclusion check compared.
		Intervals int `json:"intervals"`
		// Nemeses counts the fault steps that ran, by kind.
		Nemeses map[string]int `json:"nemeses"`
		// Hostile counts the hostile tenant's requests by attack kind;
		// HostileViolations is what its checkers (h1-h3) found.
		Hostile           map[string]int `json:"hostile,omitempty"`
		HostileViolations *int           `json:"hostile_violations,omitempty"`
		// WriteLatency: the workloads' writes during the hostile tenant's
		// cache-block attacks and outside them.
		WriteLatency map[string]check.Latencies `json:"write_latency,omitempty"`
		// Etcd: the etcd workload's grants and sessions ended, by kind.
		Etcd map[string]int `json:"etcd,omitempty"`
	}{r.Seed, math.Round(r.DurationS*10) / 10, r.Ops, r.Violations, r.Failovers, r.FailoverMS, r.TakeoverMS, r.SessionsLost, r.Intervals, r.Faults,
		r.hostileAttempts(), r.hostileViolations(), r.WriteLatency, r.Etcd}
	b, _ := json.Marshal(line)
	return string(b)
}

// Summary is the readable report printed above the JSON line.
func (r *Report) Summary() string {
	var b strings.Builder
	r.runSummary(&b)
	r.opsSummary(&b)
	r.checksSummary(&b)
	r.timingSummary(&b)
	r.hostileSummary(&b)
	fmt.Fprintf(&b, "violations: %d\n", r.Violations)
	if r.Dir != "" {
		fmt.Fprintf(&b, "data and logs: %s\n", r.Dir)
	}
	return b.String()
}

// runSummary writes the run's set-up and the faults injected.
func (r *Report) runSummary(b *strings.Builder) {
	fmt.Fprintf(b, "chaos: seed %d, fault phase %.1f s, %d steps\n", r.Seed, r.DurationS, r.Steps)
	fmt.Fprintf(b, "network: %s\n", r.Network)
	if r.Proxies > 0 {
		fmt.Fprintf(b, "proxies: %d lockproxies; half the workers (and the holder process) send through them\n", r.Proxies)
	}
	fmt.Fprintf(b, "faults injected:\n")
	for _, k := range slices.Sorted(maps.Keys(r.Faults)) {
		fmt.Fprintf(b, "  %-32s %4d\n", k, r.Faults[k])
	}
	fmt.Fprintf(b, "fsync faults: %s\n", r.FsyncFaults)
	if len(r.MoveOutcomes) > 0 {
		fmt.Fprintf(b, "move, restore and disk outcomes:\n")
		for _, k := range slices.Sorted(maps.Keys(r.MoveOutcomes)) {
			fmt.Fprintf(b, "  %-70s %4d\n", k, r.MoveOutcomes[k])
		}
	}
	if len(r.Side) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Side)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Side[k]))
		}
		fmt.Fprintf(b, "moving prefix %s: %s\n", sidePrefix, strings.Join(parts, ", "))
	}
}

// opsSummary writes the operations the checkers had, by kind.
func (r *Report) opsSummary(b *strings.Builder) {
	fmt.Fprintf(b, "operations checked: %d client calls; %d grants, %d hold intervals, %d fenced writes accepted, %d stale writes refused, %d lock-state observations, %d deletion indices, %d config ops, %d acknowledged unique puts\n",
		r.Ops, r.Grants, r.Intervals, r.AcceptedWrites, r.StaleRefused, r.LockObservations, r.Deletions, r.ConfigOps, r.AckedWrites)
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(r.OpsByKind)) {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, r.OpsByKind[k]))
	}
	fmt.Fprintf(b, "  by kind: %s\n", strings.Join(kinds, ", "))
	if len(r.Etcd) > 0 { // workload_etcd.go
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Etcd)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Etcd[k]))
		}
		fmt.Fprintf(b, "  etcd clients through the gateways: %s\n", strings.Join(parts, ", "))
	}
}

// checksSummary writes every checker's count and violations (the first
// check.MaxDetails of them spelled out).
func (r *Report) checksSummary(b *strings.Builder) {
	fmt.Fprintf(b, "checkers:\n")
	for _, c := range r.Checks {
		status := "ok"
		if len(c.Violations) > 0 {
			status = fmt.Sprintf("%d VIOLATIONS", len(c.Violations))
		}
		extra := ""
		if strings.HasPrefix(c.Name, "c.") {
			extra = " (porcupine: " + r.Linearizable + ")"
		}
		fmt.Fprintf(b, "  %-42s %8d checked  %s%s\n", c.Name, c.Checked, status, extra)
		for i, v := range c.Violations {
			if i == check.MaxDetails {
				fmt.Fprintf(b, "      ... %d more\n", len(c.Violations)-check.MaxDetails)
				break
			}
			fmt.Fprintf(b, "      - %s\n", v.Detail)
		}
	}
}

// timingSummary writes the fail-over, takeover and heal times, the
// sessions lost, the cache's share and the outages.
func (r *Report) timingSummary(b *strings.Builder) {
	fmt.Fprintf(b, "cell failover (leader killed/paused/cut off → first commit under the new leader): %s\n", r.FailoverMS)
	for _, k := range slices.Sorted(maps.Keys(r.FailoverByKind)) {
		fmt.Fprintf(b, "  %-32s %s\n", k, r.FailoverByKind[k])
	}
	fmt.Fprintf(b, "takeover (holder process killed/paused → next waiter granted): %s\n", r.TakeoverMS)
	for _, k := range slices.Sorted(maps.Keys(r.TakeoverByKind)) {
		fmt.Fprintf(b, "  %-32s %s\n", k, r.TakeoverByKind[k])
	}
	fmt.Fprintf(b, "majority back after kill-three → first commit: %s\n", r.RegainMS)
	fmt.Fprintf(b, "liveness phase after the heal: %.1f s until every waiter was granted (or the bound)\n", r.HealedS)
	fmt.Fprintf(b, "sessions lost to fail-overs: %d; jeopardy episodes: %d\n", r.SessionsLost, r.Jeopardies)
	fmt.Fprintf(b, "config gets answered from the client cache: %d of %d\n", r.ConfigCacheHits, r.ConfigCacheHits+r.ConfigCacheMisses)
	if len(r.Outages) > 0 {
		fmt.Fprintf(b, "OUTAGES (no commit for a lease or more): %s; sessions ended during them: %d\n", strings.Join(r.Outages, ", "), r.SessionsLostToOutages)
	}
	if len(r.SideOutages) > 0 {
		fmt.Fprintf(b, "the moving prefix without a commit for a second or more: %s\n", strings.Join(r.SideOutages, ", "))
	}
}
