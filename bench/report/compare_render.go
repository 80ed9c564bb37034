package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"text/tabwriter"
	"time"
)

// Colours of the two sides in the comparison's charts.
const (
	colorA = "#1f77b4"
	colorB = "#ff7f0e"
)

// Table writes the comparison: one line per figure of every case both
// sides ran (A, B, B/A and the verdict), then the cases only one ran.
func (c *Comparison) Table(w io.Writer) error {
	fmt.Fprintf(w, "A: %s (%d runs)\nB: %s (%d runs)\nfigures: median per side; B/A < 1 is better for latency, > 1 for rates\n\n",
		c.A.Name, len(c.A.Runs), c.B.Name, len(c.B.Runs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tfigure\tA\tB\tB/A\tverdict\t")
	for _, cc := range c.Both {
		name := cc.Scenario + " / " + cc.Case
		for _, f := range cc.Figures {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", name, f.Name, num(f.A), num(f.B), ratioText(f), verdictText(f))
			name = ""
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, only := range []struct {
		side string
		keys []string
	}{{"A", c.OnlyA}, {"B", c.OnlyB}} {
		for _, k := range only.keys {
			fmt.Fprintf(w, "only in %s: %s\n", only.side, k)
		}
	}
	return nil
}

// JSON writes the comparison as indented JSON.
func (c *Comparison) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

func num(v float64) string { return fmt.Sprintf("%.4g", v) }

func ratioText(f Figure) string {
	if f.Ratio == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f", *f.Ratio)
}

func verdictText(f Figure) string {
	if f.Verdict == NoTrend {
		return ""
	}
	if f.Verdict == Same {
		return "same"
	}
	return fmt.Sprintf("%s (%s is better)", f.Verdict, f.Better)
}

// compareRow is one figure in the HTML ratio table.
type compareRow struct {
	Case, Figure, A, B, Ratio, Verdict, Class string
}

// HTML writes one self-contained page: the ratio table, the cases only
// one side ran, and per case both sides' latency CDFs overlaid (A in
// blue, B in orange, one line per run).
func (c *Comparison) HTML(w io.Writer) error {
	var rows []compareRow
	var secs []section
	for _, cc := range c.Both {
		name := cc.Scenario + " / " + cc.Case
		for i, f := range cc.Figures {
			r := compareRow{Figure: f.Name, A: num(f.A), B: num(f.B), Ratio: ratioText(f), Verdict: verdictText(f), Class: string(f.Verdict)}
			if i == 0 {
				r.Case = name
			}
			rows = append(rows, r)
		}
		secs = append(secs, section{Name: name, Charts: []chart{{"latency CDF, A and B", SVGChart(c.cdfSeries(cc), latencyAxis, fractionAxis)}}})
	}
	return comparePage.Execute(w, struct {
		A, B         Side
		Generated    string
		Rows         []compareRow
		OnlyA, OnlyB []string
		Sections     []section
	}{c.A, c.B, time.Now().Format("2006-01-02 15:04:05 MST"), rows, c.OnlyA, c.OnlyB, secs})
}

// cdfSeries is every run's CDF of the case, A's then B's, named by side.
func (c *Comparison) cdfSeries(cc CaseComparison) []Series {
	var ss []Series
	for _, side := range []struct {
		label, color string
		runs         []Result
	}{{"A", colorA, cc.RunsA}, {"B", colorB, cc.RunsB}} {
		for i, r := range side.runs {
			name := side.label
			if len(side.runs) > 1 {
				name = fmt.Sprintf("%s run %d", side.label, i+1)
			}
			ss = append(ss, Series{Name: name, Color: side.color, Points: r.Summary.CDF})
		}
	}
	return ss
}

var comparePage = template.Must(template.New("compare").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>lockbench compare</title>
<style>` + pageStyle + `</style></head>
<body><h1>lockbench compare</h1>
<p><span style="color:` + colorA + `">■</span> A: {{.A.Name}} ({{len .A.Runs}} runs) &nbsp; <span style="color:` + colorB + `">■</span> B: {{.B.Name}} ({{len .B.Runs}} runs). Each figure is the median of a side's runs; B/A below 1 is better for latency, above 1 for rates. Generated {{.Generated}}.</p>
<div class="scroll"><table id="ratios"><thead><tr><th>case</th><th>figure</th><th>A</th><th>B</th><th>B/A</th><th>verdict</th></tr></thead><tbody>
{{range .Rows}}<tr><td class="text">{{.Case}}</td><td class="text">{{.Figure}}</td><td>{{.A}}</td><td>{{.B}}</td><td>{{.Ratio}}</td><td class="text {{.Class}}">{{.Verdict}}</td></tr>
{{end}}</tbody></table></div>
{{if .OnlyA}}<h2>Only in A</h2><ul>{{range .OnlyA}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .OnlyB}}<h2>Only in B</h2><ul>{{range .OnlyB}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{range .Sections}}<h2>{{.Name}}</h2><div class="charts">{{range .Charts}}<figure><figcaption>{{.Title}}</figcaption>{{.SVG}}</figure>{{end}}</div>
{{end}}</body></html>
`))
