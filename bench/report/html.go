package report

import (
	"fmt"
	"html/template"
)

// pageData is what the report page shows.
type pageData struct {
	Title    string
	Run      *Run
	Rows     []row
	Capacity *CapacityPlan
	Sections []section
}

// section is one result's charts.
type section struct {
	Name   string
	Charts []chart
}

// chart is one drawn chart with its caption.
type chart struct {
	Title string
	SVG   template.HTML
}

// row is one result in the page's table; extras are separate cells of
// their own list so that the line wraps between them.
type row struct {
	Scenario, Case            string
	N, Errors                 int
	Rate, P50, P99, P999, Max string
	Extras                    []string
}

func resultRows(rs []Result) []row {
	out := make([]row, 0, len(rs))
	for _, res := range rs {
		s := res.Summary
		r := row{Scenario: res.Scenario, Case: res.Case, N: s.N, Errors: s.Errors, Rate: fmt.Sprintf("%.0f", s.Rate),
			P50: fmt.Sprintf("%.2f", s.P50), P99: fmt.Sprintf("%.2f", s.P99), P999: fmt.Sprintf("%.2f", s.P999), Max: fmt.Sprintf("%.2f", s.Max)}
		for _, k := range sortedKeys(res.Extra) {
			r.Extras = append(r.Extras, fmt.Sprintf("%s=%.3g", k, res.Extra[k]))
		}
		out = append(out, r)
	}
	return out
}

// pageStyle keeps everything inside the page's width: tables scroll in
// their own box and wrap long cells, charts shrink with the window.
const pageStyle = `body{font:14px sans-serif;margin:2em;max-width:100%;box-sizing:border-box}
p,li{overflow-wrap:anywhere}.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:13px}
th,td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top;white-space:nowrap}
th{background:#f3f3f3;position:sticky;top:0}td.text{text-align:left;min-width:8em;max-width:28em;white-space:normal;overflow-wrap:anywhere}
td.extra{text-align:left;min-width:14em;max-width:40em;font-size:12px;color:#333;white-space:normal;overflow-wrap:anywhere}td.extra span{display:inline-block;margin-right:1em}
.better{color:#11772e}.worse{color:#b3261e}
.charts{display:flex;gap:2em;flex-wrap:wrap}figure{margin:0;max-width:100%}svg{background:#fff;border:1px solid #ccc;max-width:100%;height:auto}
ol.plan{font-size:13px}`

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}} {{.Run.Started.Format "2006-01-02 15:04:05"}}</title>
<style>` + pageStyle + `</style></head>
<body><h1>{{.Title}}</h1>
<p>Started {{.Run.Started.Format "2006-01-02 15:04:05 MST"}} on {{.Run.Host}} against {{range .Run.Endpoints}}{{.}} {{end}}</p>
<div class="scroll"><table id="results"><thead><tr><th>scenario</th><th>case</th><th>ops</th><th>errors</th><th>ops/s</th><th>p50 ms</th><th>p99 ms</th><th>p999 ms</th><th>max ms</th><th>extra</th></tr></thead><tbody>
{{range .Rows}}<tr><td class="text">{{.Scenario}}</td><td class="text">{{.Case}}</td><td>{{.N}}</td><td>{{.Errors}}</td><td>{{.Rate}}</td><td>{{.P50}}</td><td>{{.P99}}</td><td>{{.P999}}</td><td>{{.Max}}</td><td class="extra">{{range .Extras}}<span>{{.}}</span> {{end}}</td></tr>
{{end}}</tbody></table></div>
{{with .Capacity}}<h2 id="capacity">Capacity plan from this run's figures</h2>
<p>Target: {{.Target}}</p>
<p>Measured figures used:</p><ul>{{range .Inputs}}<li>{{.}}</li>{{end}}</ul>
<ol class="plan">{{range .Reasoning}}<li>{{.}}</li>{{end}}</ol>
<p><b>{{.Result}}</b></p>
{{end}}
{{range .Sections}}<h2>{{.Name}}</h2><div class="charts">{{range .Charts}}<figure><figcaption>{{.Title}}</figcaption>{{.SVG}}</figure>{{end}}</div>
{{end}}</body></html>
`))
