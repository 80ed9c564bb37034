package report

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"

	"github.com/lockservice/lockd/bench/stats"
)

// Chart bounds: the drawing's size, and the ticks an axis may carry.
const (
	chartW, chartH = 460.0, 270.0
	padL, padR     = 58.0, 16.0
	padT, padB     = 14.0, 44.0
	maxTicks       = 8  // ticks on a linear axis
	maxDecades     = 12 // decades on a log axis (1 µs to 1000 s)
	maxSeries      = 16 // lines in one chart (the runs of a comparison)
)

// Series is one line of a chart.
type Series struct {
	Name   string
	Color  string
	Points []stats.Point
}

// Axis is one axis: its label with the unit, and whether it is log-scale.
type Axis struct {
	Label string // e.g. "latency"
	Unit  string // e.g. "ms"
	Log   bool
}

// Ticks is an axis' domain and the values it marks.
type Ticks struct {
	Lo, Hi float64
	At     []float64
}

// LinearTicks spans [lo, hi] with at most maxTicks "nice" ticks (1, 2 or 5
// times a power of ten apart); the domain is widened to the outer ticks.
func LinearTicks(lo, hi float64) Ticks {
	if hi <= lo {
		hi = lo + 1
	}
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/float64(maxTicks-1))))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= float64(maxTicks-1) {
			step *= m
			break
		}
	}
	t := Ticks{Lo: math.Floor(lo/step) * step, Hi: math.Ceil(hi/step) * step}
	for i := 0; i <= maxTicks; i++ {
		v := t.Lo + float64(i)*step
		if v > t.Hi+step/2 {
			break
		}
		t.At = append(t.At, roundTo(v, step))
	}
	return t
}

// LogTicks spans [lo, hi] (both > 0) with a tick at every power of ten,
// the domain widened to whole decades (at most maxDecades).
func LogTicks(lo, hi float64) Ticks {
	lo, hi = math.Max(lo, 1e-3), math.Max(hi, 1e-3)
	a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if b <= a {
		b = a + 1
	}
	b = math.Min(b, a+maxDecades)
	t := Ticks{Lo: math.Pow(10, a), Hi: math.Pow(10, b)}
	for e := a; e <= b; e++ {
		t.At = append(t.At, math.Pow(10, e))
	}
	return t
}

// roundTo removes the float noise of adding steps (0.30000000000000004).
func roundTo(v, step float64) float64 {
	digits := max(0, int(-math.Floor(math.Log10(step)))+1)
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return r
}

// TickLabel writes a tick's value briefly: 0.001, 0.5, 10, 2.5k, 1M.
func TickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// axisTicks is the ticks of the values vs on axis a.
func axisTicks(vs []float64, a Axis, from0 bool) Ticks {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if len(vs) == 0 {
		lo, hi = 0, 1
	}
	if a.Log {
		return LogTicks(lo, hi)
	}
	if from0 {
		lo = math.Min(lo, 0)
	}
	return LinearTicks(lo, hi)
}

// SVGChart draws the series on x and y axes with ticks, tick labels, axis
// labels with units and, for more than one series, a legend. The svg
// element carries data-points (points drawn over all series) so a test or
// a reader can see that no chart is empty; each tick is a <g class="tick
// x"> or <g class="tick y">.
func SVGChart(ss []Series, x, y Axis) template.HTML {
	ss = ss[:min(len(ss), maxSeries)]
	var xs, ys []float64
	n := 0
	for _, s := range ss {
		for _, p := range s.Points {
			xs, ys = append(xs, p.X), append(ys, p.Y)
		}
		n += len(s.Points)
	}
	xt, yt := axisTicks(xs, x, !x.Log), axisTicks(ys, y, true)
	px := scaler(xt, x.Log, padL, chartW-padR)
	py := scaler(yt, y.Log, chartH-padB, padT)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" data-points="%d" font-family="sans-serif" font-size="11">`,
		chartW, chartH, chartW, chartH, n)
	drawTicks(&b, xt, yt, px, py, x.Log)
	for _, s := range ss {
		drawLine(&b, s, px, py)
	}
	fmt.Fprintf(&b, `<text class="axis-label x" x="%.0f" y="%.0f" text-anchor="middle">%s</text>`, (padL+chartW-padR)/2, chartH-6, template.HTMLEscapeString(axisTitle(x)))
	fmt.Fprintf(&b, `<text class="axis-label y" transform="translate(12 %.0f) rotate(-90)" text-anchor="middle">%s</text>`, (padT+chartH-padB)/2, template.HTMLEscapeString(axisTitle(y)))
	if len(ss) > 1 {
		drawLegend(&b, ss)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// axisTitle is "label (unit, log scale)".
func axisTitle(a Axis) string {
	unit := a.Unit
	if a.Log {
		unit += ", log scale"
	}
	if unit == "" {
		return a.Label
	}
	return a.Label + " (" + strings.TrimPrefix(unit, ", ") + ")"
}

// scaler maps a value of the domain t onto [from, to] in pixels.
func scaler(t Ticks, log bool, from, to float64) func(float64) float64 {
	f := func(v float64) float64 { return v }
	if log {
		f = func(v float64) float64 { return math.Log10(math.Max(v, t.Lo)) }
	}
	lo, hi := f(t.Lo), f(t.Hi)
	return func(v float64) float64 { return from + (f(v)-lo)/(hi-lo)*(to-from) }
}

// drawTicks draws both axes, a grid line and a label at every tick.
func drawTicks(b *strings.Builder, xt, yt Ticks, px, py func(float64) float64, logX bool) {
	x0, x1, y0, y1 := px(xt.Lo), px(xt.Hi), py(yt.Lo), py(yt.Hi)
	for _, v := range xt.At {
		xv := px(v)
		fmt.Fprintf(b, `<g class="tick x"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text></g>`,
			xv, y0, xv, y1, xv, y0, xv, y0+4, xv, y0+16, TickLabel(v))
	}
	for _, v := range yt.At {
		yv := py(v)
		fmt.Fprintf(b, `<g class="tick y"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text></g>`,
			x0, yv, x1, yv, x0-4, yv, x0, yv, x0-6, yv+4, TickLabel(v))
	}
	fmt.Fprintf(b, `<line class="axis x" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`, x0, y0, x1, y0)
	fmt.Fprintf(b, `<line class="axis y" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`, x0, y0, x0, y1)
}

// drawLine draws one series as a polyline.
func drawLine(b *strings.Builder, s Series, px, py func(float64) float64) {
	if len(s.Points) == 0 {
		return
	}
	color := s.Color
	if color == "" {
		color = "#1f77b4"
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, template.HTMLEscapeString(color))
	for _, p := range s.Points {
		fmt.Fprintf(b, "%.1f,%.1f ", px(p.X), py(p.Y))
	}
	b.WriteString(`"><title>` + template.HTMLEscapeString(s.Name) + `</title></polyline>`)
}

// drawLegend names each series by its colour, top left inside the plot.
func drawLegend(b *strings.Builder, ss []Series) {
	b.WriteString(`<g class="legend">`)
	for i, s := range ss {
		y := padT + 6 + float64(i)*14
		fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`,
			padL+8, y-8, template.HTMLEscapeString(s.Color), padL+22, y+1, template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</g>`)
}
