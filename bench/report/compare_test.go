package report

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockservice/lockd/bench/stats"
)

func res(scenario, cs string, params map[string]string, p50, p99, rate float64, extra map[string]float64) Result {
	return Result{Scenario: scenario, Case: cs, Params: params, Extra: extra,
		Summary: stats.Summary{N: 100, P50: p50, P99: p99, Mean: p50, Rate: rate,
			CDF: []stats.Point{{X: p50 / 2, Y: 0.01}, {X: p50, Y: 0.5}, {X: p99, Y: 0.99}}}}
}

func TestNewFigure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a, b    float64
		dir     Direction
		ratio   float64 // -1: none
		verdict Verdict
	}{
		{"latency halved", 10, 5, Lower, 0.5, Better},
		{"latency doubled", 5, 10, Lower, 2, Worse},
		{"rate up", 1000, 2500, Higher, 2.5, Better},
		{"rate down", 1000, 500, Higher, 0.5, Worse},
		{"within noise", 100, 101.5, Lower, 1.015, Same},
		{"neutral", 10, 20, Neutral, 2, NoTrend},
		{"A zero", 0, 3, Lower, -1, NoTrend},
		{"both zero", 0, 0, Lower, -1, Same},
	} {
		f := NewFigure(tc.name, tc.a, tc.b, tc.dir)
		switch {
		case tc.ratio < 0 && f.Ratio != nil:
			t.Errorf("%s: ratio %v, want none", tc.name, *f.Ratio)
		case tc.ratio >= 0 && (f.Ratio == nil || *f.Ratio != tc.ratio):
			t.Errorf("%s: ratio %v, want %v", tc.name, f.Ratio, tc.ratio)
		}
		if f.Verdict != tc.verdict {
			t.Errorf("%s: verdict %q, want %q", tc.name, f.Verdict, tc.verdict)
		}
	}
}

func TestDirectionAndMedian(t *testing.T) {
	for name, want := range map[string]Direction{
		"rss_mb_replica1": Lower, "leader_cpu_pct": Lower, "false_expiries": Lower, "added_p99_ms": Lower,
		"hit_rate": Higher, "keepalives_per_s": Neutral, "leader_keepalive_rpcs_per_s": Lower,
		"noisy_accepted_per_s": Neutral, "p99_ratio": Lower, "events_per_release": Neutral,
	} {
		if got := DirectionOf(name); got != want {
			t.Errorf("DirectionOf(%s) = %q, want %q", name, got, want)
		}
	}
	for _, tc := range []struct {
		vs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{9, 1, 5}, 5}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.vs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.vs, got, tc.want)
		}
	}
}

// Cases match by scenario, case and params (the target and the first
// error aside); each figure is the median of a side's runs.
func TestCompare(t *testing.T) {
	w32 := map[string]string{"workers": "32"}
	etcd := map[string]string{"workers": "32", "target": "etcd"}
	a := Side{Name: "etcd", Runs: []*Run{
		{Results: []Result{res("acquire", "32 workers", etcd, 10, 30, 1000, map[string]float64{"rss_mb": 400}), res("writes", "64 writers", nil, 5, 9, 3000, nil)}},
		{Results: []Result{res("acquire", "32 workers", etcd, 12, 40, 1100, map[string]float64{"rss_mb": 420})}},
		{Results: []Result{res("acquire", "32 workers", etcd, 11, 35, 1050, nil)}},
	}}
	b := Side{Name: "lockd", Runs: []*Run{
		{Results: []Result{res("acquire", "32 workers", w32, 5, 20, 2000, map[string]float64{"rss_mb": 200}), res("herd", "500", nil, 1, 2, 10, nil)}},
		{Results: []Result{res("acquire", "32 workers", w32, 6, 21, 2200, map[string]float64{"rss_mb": 220})}},
		{Results: []Result{res("acquire", "32 workers", w32, 7, 70, 2100, map[string]float64{"rss_mb": 210})}},
	}}
	c, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Both) != 1 || !slices.Equal(c.OnlyA, []string{"writes / 64 writers"}) || !slices.Equal(c.OnlyB, []string{"herd / 500"}) {
		t.Fatalf("both %d, only A %v, only B %v", len(c.Both), c.OnlyA, c.OnlyB)
	}
	got := map[string]Figure{}
	for _, f := range c.Both[0].Figures {
		got[f.Name] = f
	}
	for _, want := range []struct {
		name    string
		a, b    float64
		verdict Verdict
	}{
		{"p50_ms", 11, 6, Better},
		{"p99_ms", 35, 21, Better},
		{"rate_per_s", 1050, 2100, Better},
		{"errors", 0, 0, Same},
		{"rss_mb", 410, 210, Better}, // two of A's runs have it: their mean
	} {
		f, ok := got[want.name]
		if !ok || f.A != want.a || f.B != want.b || f.Verdict != want.verdict {
			t.Errorf("%s: %+v; want A %v B %v %s", want.name, f, want.a, want.b, want.verdict)
		}
	}
	if r := got["rate_per_s"].Ratio; r == nil || *r != 2 {
		t.Errorf("rate ratio %v, want 2", r)
	}
	if len(c.Both[0].RunsA) != 3 || len(c.Both[0].RunsB) != 3 {
		t.Errorf("runs kept for the charts: %d, %d", len(c.Both[0].RunsA), len(c.Both[0].RunsB))
	}
	if _, err := Compare(Side{Name: "none"}, b); err == nil {
		t.Error("a side with no runs: no error")
	}
}

func TestCompareOutputs(t *testing.T) {
	a := Side{Name: "a.json", Runs: []*Run{{Results: []Result{res("acquire", "1 worker", nil, 4.4, 12, 200, nil), res("disk", "one", nil, 1, 2, 3, nil)}}}}
	b := Side{Name: "b.json", Runs: []*Run{{Results: []Result{res("acquire", "1 worker", nil, 3, 8, 300, nil)}}}}
	c, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	var tb bytes.Buffer
	if err := c.Table(&tb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"acquire / 1 worker", "p50_ms", "0.682", "better (lower is better)", "1.500", "better (higher is better)", "only in A: disk / one"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	var jb bytes.Buffer
	if err := c.JSON(&jb); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Both  []CaseComparison `json:"both"`
		OnlyA []string         `json:"only_a"`
	}
	if err := json.Unmarshal(jb.Bytes(), &back); err != nil || len(back.Both) != 1 || len(back.OnlyA) != 1 {
		t.Fatalf("JSON: %v %s", err, jb.String())
	}
	var hb bytes.Buffer
	if err := c.HTML(&hb); err != nil {
		t.Fatal(err)
	}
	html := hb.String()
	polylines := regexp.MustCompile(`<polyline[^>]*stroke="(#[0-9a-f]+)"`).FindAllStringSubmatch(html, -1)
	if len(polylines) != 2 || polylines[0][1] != colorA || polylines[1][1] != colorB {
		t.Errorf("CDFs overlaid: %v", polylines)
	}
	if !strings.Contains(html, `class="legend"`) || !strings.Contains(html, `id="ratios"`) || strings.Contains(html, "<script") {
		t.Error("the compare page lacks its legend or ratio table, or has a script")
	}
}
