// Package report renders lockbench results: an aligned table, JSON, and
// one self-contained HTML page with inline SVG charts (no scripts, no
// build step).
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockservice/lockd/bench/stats"
)

// Run is one lockbench invocation.
type Run struct {
	Started   time.Time `json:"started"`
	Endpoints []string  `json:"endpoints"`
	Host      string    `json:"host"` // what the figures were measured on
	Results   []Result  `json:"results"`
	// Capacity is the deployment sized from this run's own figures for
	// the spec's region (lockbench capacity), when lockbench computed it.
	Capacity *CapacityPlan `json:"capacity,omitempty"`
}

// CapacityPlan is a capacity plan as the report shows it: the load sized
// for, the measured figures it used, the reasoning line by line and the
// deployment. lockbench fills it from bench/capacity.
type CapacityPlan struct {
	Target    string   `json:"target"`
	Inputs    []string `json:"inputs"`
	Reasoning []string `json:"reasoning"`
	Result    string   `json:"result"`
}

// Result is one scenario at one setting (for example acquire, 32 workers).
type Result struct {
	Scenario string            `json:"scenario"`
	Case     string            `json:"case"`
	Params   map[string]string `json:"params,omitempty"`
	Summary  stats.Summary     `json:"summary"`
	// Extra holds scenario figures beyond latency (events per release,
	// CPU, false expiries), by name.
	Extra map[string]float64 `json:"extra,omitempty"`
}

// Table writes one line per result.
func (r *Run) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tcase\tops\terrors\tops/s\tp50 ms\tp99 ms\tp999 ms\tmax ms\textra\t")
	for _, res := range r.Results {
		s := res.Summary
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n",
			res.Scenario, res.Case, s.N, s.Errors, s.Rate, s.P50, s.P99, s.P999, s.Max, extras(res.Extra))
	}
	return tw.Flush()
}

func extras(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%.3g", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// JSON writes the run as indented JSON.
func (r *Run) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// HTML writes one self-contained page: the results as a table, the
// capacity plan computed from them (when the run carries one), then per
// result a latency CDF (log-scale x, ticks at decades) and completions
// per second.
func (r *Run) HTML(w io.Writer) error {
	var secs []section
	for _, res := range r.Results {
		secs = append(secs, section{Name: res.Scenario + " / " + res.Case, Charts: []chart{
			{"latency CDF", SVGChart([]Series{{Name: "latency", Points: res.Summary.CDF}}, latencyAxis, fractionAxis)},
			{"completed per second", SVGChart([]Series{{Name: "completions", Points: perSecondPoints(res.Summary.PerSecond, res.Summary.ElapsedS)}}, secondsAxis, opsAxis)},
		}})
	}
	return page.Execute(w, pageData{Title: "lockbench", Run: r, Rows: resultRows(r.Results), Capacity: r.Capacity, Sections: secs})
}

// The axes of the report's charts.
var (
	latencyAxis  = Axis{Label: "latency", Unit: "ms", Log: true}
	fractionAxis = Axis{Label: "fraction of operations", Unit: "≤ latency"}
	secondsAxis  = Axis{Label: "time since the case began", Unit: "s"}
	opsAxis      = Axis{Label: "completed", Unit: "ops/s"}
)

// minPartialSecond is the shortest last, partial second drawn: a rate
// over a few milliseconds says nothing.
const minPartialSecond = 0.25

// perSecondPoints places second i's count at the middle of that second.
// The last second of a case that did not last whole seconds is partial:
// its count is scaled to a rate over the part that ran (drawn as a count
// it fell to near zero), or left out when that part is under
// minPartialSecond.
func perSecondPoints(counts []int, elapsedS float64) []stats.Point {
	pts := make([]stats.Point, 0, len(counts))
	for i, n := range counts {
		width := 1.0
		if i == len(counts)-1 && elapsedS > float64(i) && elapsedS < float64(i+1) {
			width = elapsedS - float64(i)
		}
		if width < minPartialSecond {
			break
		}
		pts = append(pts, stats.Point{X: float64(i) + width/2, Y: float64(n) / width})
	}
	return pts
}

func sortedKeys(m map[string]float64) []string { return slices.Sorted(maps.Keys(m)) }
