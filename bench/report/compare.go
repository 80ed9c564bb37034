package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Bounds of a comparison.
const (
	// MaxRunsPerSide is the most runs one side of a comparison takes (the
	// issue's targets are the median of three alternations).
	MaxRunsPerSide = 9
	// SameWithin is the relative change under which a figure counts as
	// the same in both runs (noise on a shared machine).
	SameWithin = 0.02
)

// Direction says which way a figure is better.
type Direction string

// The directions of a figure.
const (
	Lower   Direction = "lower"  // latency, CPU, memory, errors
	Higher  Direction = "higher" // throughput, hit rate
	Neutral Direction = ""       // a figure the workload sets (KeepAlives/s at the cell)
)

// Verdict is how B's figure compares with A's.
type Verdict string

// The verdicts of a figure.
const (
	Better  Verdict = "better"
	Worse   Verdict = "worse"
	Same    Verdict = "same"
	NoTrend Verdict = "" // a neutral figure, or no ratio (A is 0)
)

// Figure is one number of one case in both runs: the median over each
// side's runs that have it.
type Figure struct {
	Name string  `json:"name"`
	A    float64 `json:"a"`
	B    float64 `json:"b"`
	// Ratio is B/A; absent when A is 0.
	Ratio   *float64  `json:"ratio,omitempty"`
	Better  Direction `json:"better,omitempty"`
	Verdict Verdict   `json:"verdict,omitempty"`
}

// CaseComparison is one case found on both sides.
type CaseComparison struct {
	Scenario string   `json:"scenario"`
	Case     string   `json:"case"`
	Key      string   `json:"key"`
	Figures  []Figure `json:"figures"`
	// RunsA and RunsB are the results of the case in each run of each
	// side, for the charts.
	RunsA []Result `json:"-"`
	RunsB []Result `json:"-"`
}

// Comparison is two sides, each one or more runs, side by side.
type Comparison struct {
	A, B  Side             `json:"-"`
	Names [2]string        `json:"sides"`
	Both  []CaseComparison `json:"both"`
	OnlyA []string         `json:"only_a"` // keys of the cases only A ran
	OnlyB []string         `json:"only_b"`
}

// Side is one side of a comparison: its name (the files) and its runs.
type Side struct {
	Name string
	Runs []*Run
}

// ignoredParams differ between runs of the same case without making it
// another case: the target measured, the first error seen, a folder.
var ignoredParams = []string{"target", "first_keepalive_error", "dir"}

// CaseKey identifies a case across runs: scenario, case name and the
// params that define it.
func CaseKey(r Result) string {
	var b strings.Builder
	b.WriteString(r.Scenario + " / " + r.Case)
	for _, k := range slices.Sorted(maps.Keys(r.Params)) {
		if !slices.Contains(ignoredParams, k) {
			fmt.Fprintf(&b, " %s=%s", k, r.Params[k])
		}
	}
	return b.String()
}

// Compare sets the runs of b against those of a: every case present on
// both sides with each figure's median per side, the ratio B/A and which
// way is better; the cases only one side ran by key. Cases keep the order
// in which A's first run has them.
func Compare(a, b Side) (Comparison, error) {
	for _, s := range []Side{a, b} {
		if len(s.Runs) == 0 || len(s.Runs) > MaxRunsPerSide {
			return Comparison{}, fmt.Errorf("compare: side %q has %d runs, want 1 to %d", s.Name, len(s.Runs), MaxRunsPerSide)
		}
	}
	ka, byA := casesOf(a.Runs)
	kb, byB := casesOf(b.Runs)
	c := Comparison{A: a, B: b, Names: [2]string{a.Name, b.Name}}
	for _, k := range ka {
		if _, ok := byB[k]; !ok {
			c.OnlyA = append(c.OnlyA, k)
			continue
		}
		first := byA[k][0]
		c.Both = append(c.Both, CaseComparison{Scenario: first.Scenario, Case: first.Case, Key: k,
			Figures: compareFigures(byA[k], byB[k]), RunsA: byA[k], RunsB: byB[k]})
	}
	for _, k := range kb {
		if _, ok := byA[k]; !ok {
			c.OnlyB = append(c.OnlyB, k)
		}
	}
	return c, nil
}

// casesOf groups the results of runs by case key, keys in first-seen order.
func casesOf(runs []*Run) ([]string, map[string][]Result) {
	var keys []string
	by := map[string][]Result{}
	for _, r := range runs {
		for _, res := range r.Results {
			k := CaseKey(res)
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], res)
		}
	}
	return keys, by
}

// compareFigures is the fixed figures, then every extra both sides have.
func compareFigures(a, b []Result) []Figure {
	type getter func(Result) (float64, bool)
	fixed := []struct {
		name string
		get  getter
		dir  Direction
	}{
		{"p50_ms", func(r Result) (float64, bool) { return r.Summary.P50, r.Summary.N > 0 }, Lower},
		{"p99_ms", func(r Result) (float64, bool) { return r.Summary.P99, r.Summary.N > 0 }, Lower},
		{"mean_ms", func(r Result) (float64, bool) { return r.Summary.Mean, r.Summary.N > 0 }, Lower},
		{"rate_per_s", func(r Result) (float64, bool) { return r.Summary.Rate, true }, Higher},
		{"errors", func(r Result) (float64, bool) { return float64(r.Summary.Errors), true }, Lower},
	}
	var out []Figure
	for _, f := range fixed {
		if va, vb := values(a, f.get), values(b, f.get); len(va) > 0 && len(vb) > 0 {
			out = append(out, NewFigure(f.name, Median(va), Median(vb), f.dir))
		}
	}
	for _, name := range extraNames(a, b) {
		get := func(r Result) (float64, bool) { v, ok := r.Extra[name]; return v, ok }
		if va, vb := values(a, get), values(b, get); len(va) > 0 && len(vb) > 0 {
			out = append(out, NewFigure(name, Median(va), Median(vb), DirectionOf(name)))
		}
	}
	return out
}

func values(rs []Result, get func(Result) (float64, bool)) []float64 {
	var out []float64
	for _, r := range rs {
		if v, ok := get(r); ok {
			out = append(out, v)
		}
	}
	return out
}

// extraNames is every extra's name on either side, sorted.
func extraNames(a, b []Result) []string {
	set := map[string]bool{}
	for _, r := range slices.Concat(a, b) {
		for k := range r.Extra {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// NewFigure compares a and b of a figure that is better in direction dir.
func NewFigure(name string, a, b float64, dir Direction) Figure {
	f := Figure{Name: name, A: a, B: b, Better: dir}
	if a == 0 {
		if b == 0 && dir != Neutral {
			f.Verdict = Same
		}
		return f
	}
	ratio := b / a
	f.Ratio = &ratio
	switch {
	case dir == Neutral:
	case math.Abs(ratio-1) <= SameWithin:
		f.Verdict = Same
	case (ratio < 1) == (dir == Lower):
		f.Verdict = Better
	default:
		f.Verdict = Worse
	}
	return f
}

// directionRules say which way an extra is better, by a part of its name;
// the first rule that matches decides.
var directionRules = []struct {
	part string
	dir  Direction
}{
	{"hit_rate", Higher},
	{"accepted_per_s", Neutral},
	{"refused", Neutral},
	{"cpu_pct", Lower},
	{"rss_mb", Lower},
	{"false_expiries", Lower},
	{"errors", Lower},
	{"failed", Lower},
	{"misses", Lower},
	{"rpcs", Lower},
	{"invalidations_sent", Lower},
	{"bytes", Lower},
	{"_ms", Lower},
	{"ratio", Lower},
	{"acquires_per_s", Higher},
	{"puts_per_s", Higher},
	{"writes_per_s", Higher},
}

// DirectionOf is which way the extra called name is better (Neutral when
// no rule knows it: a figure the workload sets, such as KeepAlives/s).
func DirectionOf(name string) Direction {
	for _, r := range directionRules {
		if strings.Contains(name, r.part) {
			return r.dir
		}
	}
	return Neutral
}

// Median is the middle value of vs (the mean of the two middle ones for
// an even count); 0 for none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
