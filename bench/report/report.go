// Package report renders lockbench results: an aligned table, JSON, and
// one self-contained HTML page with inline SVG charts (no scripts, no
// build step).
package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
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

// HTML writes one self-contained page: the table, then per result a
// latency CDF (log-scale x) and completions per second.
func (r *Run) HTML(w io.Writer) error {
	type chart struct {
		Title string
		SVG   template.HTML
	}
	type section struct {
		Name   string
		Charts []chart
	}
	var table strings.Builder
	if err := r.Table(&table); err != nil {
		return err
	}
	var secs []section
	for _, res := range r.Results {
		name := res.Scenario + " / " + res.Case
		cdf := make([]stats.Point, len(res.Summary.CDF))
		copy(cdf, res.Summary.CDF)
		var rate []stats.Point
		for i, n := range res.Summary.PerSecond {
			rate = append(rate, stats.Point{X: float64(i + 1), Y: float64(n)})
		}
		secs = append(secs, section{Name: name, Charts: []chart{
			{"latency CDF (ms, log scale)", svgLine(cdf, true, "ms", "fraction")},
			{"completed per second", svgLine(rate, false, "s", "ops")},
		}})
	}
	return page.Execute(w, struct {
		Run      *Run
		Table    string
		Sections []section
	}{r, table.String(), secs})
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>lockbench {{.Run.Started.Format "2006-01-02 15:04:05"}}</title>
<style>body{font:14px sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em;overflow-x:auto}
.charts{display:flex;gap:2em;flex-wrap:wrap}svg{background:#fff;border:1px solid #ccc}</style></head>
<body><h1>lockbench</h1>
<p>Started {{.Run.Started.Format "2006-01-02 15:04:05 MST"}} on {{.Run.Host}} against {{range .Run.Endpoints}}{{.}} {{end}}</p>
<pre>{{.Table}}</pre>
{{range .Sections}}<h2>{{.Name}}</h2><div class="charts">{{range .Charts}}<figure><figcaption>{{.Title}}</figcaption>{{.SVG}}</figure>{{end}}</div>
{{end}}</body></html>
`))

// svgLine draws points as one polyline with axis labels. The svg element
// carries data-points, the number of points drawn, so a test (or a reader)
// can see that no chart is empty.
func svgLine(pts []stats.Point, logX bool, xUnit, yUnit string) template.HTML {
	const w, h, pad = 420.0, 240.0, 40.0
	fx := func(x float64) float64 {
		if logX {
			return math.Log10(math.Max(x, 0.001))
		}
		return x
	}
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	for _, p := range pts {
		minX, maxX, maxY = math.Min(minX, fx(p.X)), math.Max(maxX, fx(p.X)), math.Max(maxY, p.Y)
	}
	if len(pts) == 0 || maxX == minX {
		maxX = minX + 1
	}
	if maxY == 0 {
		maxY = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" data-points="%d">`, w, h, len(pts))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`, pad, h-pad, w-pad/2, h-pad)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#888"/>`, pad, pad/2, pad, h-pad)
	if len(pts) > 0 {
		b.WriteString(`<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="`)
		for _, p := range pts {
			x := pad + (fx(p.X)-minX)/(maxX-minX)*(w-1.5*pad)
			y := h - pad - p.Y/maxY*(h-1.5*pad)
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		}
		b.WriteString(`"/>`)
	}
	lo, hi := minX, maxX
	if logX {
		lo, hi = math.Pow(10, minX), math.Pow(10, maxX)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11">%.3g %s</text>`, pad, h-pad+15, lo, xUnit)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%.3g %s</text>`, w-pad/2, h-pad+15, hi, xUnit)
	fmt.Fprintf(&b, `<text x="2" y="%.0f" font-size="11">%.3g %s</text>`, pad/2+4, maxY, yUnit)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func sortedKeys(m map[string]float64) []string { return slices.Sorted(maps.Keys(m)) }
