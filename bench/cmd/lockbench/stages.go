package main

// stages: where one uncontended Lock's and one Unlock's milliseconds go.
// Sequential Lock+Unlock on fresh locks with tracing on (sdk.WithTrace,
// api.HeaderTrace): the client's encode, the network, each server stage
// (a lockproxy's hop, a lockd's decode, queue, entry, commit, apply,
// hooks, wake, reply) and the client's decode, p50 and p99 of each.

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// maxStageIterations bounds --stages-n: each iteration is two commits,
// sequential.
const maxStageIterations = 100_000

// stageSDK is the SDK's own time around the traced call: the lock
// recipe, routing, the session (the whole Lock or Unlock less the call).
const stageSDK = "sdk"

// stageSamples is one operation's stage durations, by stage, in the order
// the stages were first seen.
type stageSamples struct {
	order []string
	by    map[string][]time.Duration
	whole *stats.Recorder // the operation's own latency, as the caller saw it
}

func newStageSamples() *stageSamples {
	return &stageSamples{by: map[string][]time.Duration{}, whole: stats.NewRecorder(time.Now())}
}

// add records one traced call.
func (s *stageSamples) add(tr *sdk.Trace, whole time.Duration) {
	s.whole.Add(whole, time.Now())
	stages := tr.Stages()
	if call := tr.Encode + tr.RoundTrip + tr.Decode; call <= whole {
		stages = append(stages, api.TimingStage{Name: stageSDK, Dur: whole - call})
	}
	for _, st := range stages {
		if _, ok := s.by[st.Name]; !ok {
			s.order = append(s.order, st.Name)
		}
		s.by[st.Name] = append(s.by[st.Name], st.Dur)
	}
}

// extra is the samples' p50 and p99 per stage, in milliseconds, as report
// extras ("commit_p50_ms").
func (s *stageSamples) extra() map[string]float64 {
	m := map[string]float64{}
	for name, ds := range s.by {
		p50, p99 := quantiles(ds)
		m[name+"_p50_ms"], m[name+"_p99_ms"] = msOf(p50), msOf(p99)
	}
	return m
}

func quantiles(ds []time.Duration) (p50, p99 time.Duration) {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return stats.Percentile(sorted, 0.50), stats.Percentile(sorted, 0.99)
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// stagesScenario runs n sequential Lock+Unlock straight to the replicas
// and, when the directory lists lockproxies, through them.
func stagesScenario(ctx context.Context, e *env, n int) ([]report.Result, error) {
	if n <= 0 || n > maxStageIterations {
		return nil, fmt.Errorf("--stages-n must be in 1..%d", maxStageIterations)
	}
	var out []report.Result
	for _, direct := range []bool{true, false} {
		res, err := e.stagesCase(ctx, n, direct)
		if err != nil {
			return out, err
		}
		out = append(out, res...)
	}
	writeStageTable(os.Stderr, out)
	return out, nil
}

// stagesCase is one route's n iterations; through proxies it is skipped
// (no result) when the directory lists none.
func (e *env) stagesCase(ctx context.Context, n int, direct bool) ([]report.Result, error) {
	cfg := e.config()
	cfg.Direct = direct
	c, err := sdk.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	route := "direct"
	if !direct {
		if len(c.Directory().Proxies) == 0 {
			return nil, nil
		}
		route = "via proxy"
	}
	lock, unlock := newStageSamples(), newStageSamples()
	base := fmt.Sprintf("/demo/lockbench/%s/stages-%s", e.run, strings.ReplaceAll(route, " ", "-"))
	if err := e.stageLoop(ctx, c, base, 5, newStageSamples(), newStageSamples()); err != nil { // warm-up: session, connections
		return nil, err
	}
	waitProfile := e.profile(ctx, "stages "+route)
	start := time.Now()
	err = e.stageLoop(ctx, c, base+"/m", n, lock, unlock)
	elapsed := time.Since(start)
	waitProfile()
	if err != nil {
		return nil, err
	}
	params := map[string]string{"route": route, "iterations": fmt.Sprint(n)}
	return []report.Result{
		{Scenario: "stages", Case: "Lock, " + route, Params: params, Summary: lock.whole.Summarise(elapsed), Extra: lock.extra()},
		{Scenario: "stages", Case: "Unlock, " + route, Params: params, Summary: unlock.whole.Summarise(elapsed), Extra: unlock.extra()},
	}, nil
}

// stageLoop runs n traced Lock+Unlock on fresh locks under base.
func (e *env) stageLoop(ctx context.Context, c *sdk.Client, base string, n int, lock, unlock *stageSamples) error {
	for i := 0; i < n; i++ {
		m := c.NewMutex(fmt.Sprintf("%s/%d", base, i))
		var tr sdk.Trace
		t0 := time.Now()
		if err := m.Lock(sdk.WithTrace(ctx, &tr)); err != nil {
			return err
		}
		lock.add(&tr, time.Since(t0))
		tr = sdk.Trace{}
		t0 = time.Now()
		if err := m.Unlock(sdk.WithTrace(ctx, &tr)); err != nil {
			return err
		}
		unlock.add(&tr, time.Since(t0))
		if i%20 == 0 {
			e.progress("stages: %d/%d", i, n)
		}
	}
	return nil
}

// writeStageTable prints one row per stage, p50 and p99 of each result.
func writeStageTable(w io.Writer, results []report.Result) {
	if len(results) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "stage (ms)\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s p50\tp99\t", r.Case)
	}
	fmt.Fprintln(tw)
	for _, name := range stageRowOrder(results) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, r := range results {
			p50, ok50 := r.Extra[name+"_p50_ms"]
			p99, ok99 := r.Extra[name+"_p99_ms"]
			if !ok50 || !ok99 {
				fmt.Fprint(tw, "-\t-\t")
				continue
			}
			fmt.Fprintf(tw, "%.3f\t%.3f\t", p50, p99)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "whole call\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%.3f\t%.3f\t", r.Summary.P50, r.Summary.P99)
	}
	fmt.Fprintln(tw)
	_ = tw.Flush()
}

// stageOrder is the order stages are printed in: the path a request
// takes. A stage not listed goes last, by name.
var stageOrder = []string{stageSDK, sdk.StageClientEncode, sdk.StageNet, api.StageProxy, api.StageUpNet,
	api.StageDecode, api.StageQueue, api.StageEntry, api.StageCommit, api.StageApply, api.StageHooks,
	api.StageWake, api.StageReply, sdk.StageClientDecode}

// stageRowOrder is every stage the results have, in stageOrder.
func stageRowOrder(results []report.Result) []string {
	seen := map[string]bool{}
	for _, r := range results {
		for k := range r.Extra {
			if name, ok := strings.CutSuffix(k, "_p50_ms"); ok {
				seen[name] = true
			}
		}
	}
	rank := func(name string) int {
		if i := slices.Index(stageOrder, name); i >= 0 {
			return i
		}
		return len(stageOrder)
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}
