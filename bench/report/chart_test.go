package report

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockservice/lockd/bench/stats"
)

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		got    Ticks
		lo, hi float64
		at     []float64
	}{
		{"fraction", LinearTicks(0, 1), 0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{"ops per second", LinearTicks(0, 1234), 0, 1400, []float64{0, 200, 400, 600, 800, 1000, 1200, 1400}},
		{"seconds", LinearTicks(0, 10.5), 0, 12, []float64{0, 2, 4, 6, 8, 10, 12}},
		{"flat", LinearTicks(5, 5), 5, 6, []float64{5, 5.2, 5.4, 5.6, 5.8, 6}},
		{"latency ms", LogTicks(3.2, 48), 1, 100, []float64{1, 10, 100}},
		{"sub-ms", LogTicks(0.04, 2.5), 0.01, 10, []float64{0.01, 0.1, 1, 10}},
		{"one value", LogTicks(10, 10), 10, 100, []float64{10, 100}},
	} {
		if tc.got.Lo != tc.lo || tc.got.Hi != tc.hi || !slices.Equal(tc.got.At, tc.at) {
			t.Errorf("%s: %+v; want [%v, %v] at %v", tc.name, tc.got, tc.lo, tc.hi, tc.at)
		}
		if n := len(tc.got.At); n < 2 || n > maxTicks+1 {
			t.Errorf("%s: %d ticks", tc.name, n)
		}
	}
	if n := len(LogTicks(1e-9, 1e9).At); n != maxDecades+1 {
		t.Errorf("log ticks over 18 decades: %d, want the bound %d", n, maxDecades+1)
	}
	for v, want := range map[float64]string{0: "0", 0.2: "0.2", 0.001: "0.001", 1400: "1400", 25_000: "25k", 2e6: "2M"} {
		if got := TickLabel(v); got != want {
			t.Errorf("TickLabel(%v) = %q, want %q", v, got, want)
		}
	}
}

// A chart has ticks with labels on both axes, the axis titles with their
// units, and its points inside the plot area.
func TestSVGChartAxes(t *testing.T) {
	pts := []stats.Point{{X: 2, Y: 0.01}, {X: 5, Y: 0.5}, {X: 40, Y: 1}}
	svg := string(SVGChart([]Series{{Name: "a", Points: pts}}, latencyAxis, fractionAxis))
	xLabels := regexp.MustCompile(`<g class="tick x">.*?<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(svg, -1)
	var xs []string
	for _, m := range xLabels {
		xs = append(xs, m[1])
	}
	if !slices.Equal(xs, []string{"1", "10", "100"}) {
		t.Errorf("x ticks %v, want decades 1, 10, 100", xs)
	}
	if n := strings.Count(svg, `class="tick y"`); n != 6 {
		t.Errorf("%d y ticks, want 6", n)
	}
	for _, want := range []string{"latency (ms, log scale)", "fraction of operations (≤ latency)", `data-points="3"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(svg, `class="legend"`) {
		t.Error("a legend for one series")
	}
	coords := regexp.MustCompile(`<polyline[^>]* points="([^"]*)"`).FindStringSubmatch(svg)
	for _, xy := range strings.Fields(coords[1]) {
		var x, y float64
		if _, err := fmt.Sscanf(xy, "%f,%f", &x, &y); err != nil || x < padL || x > chartW-padR || y < padT || y > chartH-padB {
			t.Errorf("point %s outside the plot", xy)
		}
	}
}

// The completions-per-second series: whole seconds as counts; a partial
// last second as a rate over the part that ran, or left out when tiny.
func TestPerSecondPoints(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counts  []int
		elapsed float64
		want    []stats.Point
	}{
		{"whole seconds", []int{100, 102}, 2, []stats.Point{{X: 0.5, Y: 100}, {X: 1.5, Y: 102}}},
		{"half a second", []int{100, 50}, 1.5, []stats.Point{{X: 0.5, Y: 100}, {X: 1.25, Y: 100}}},
		{"a sliver", []int{100, 100, 1}, 2.05, []stats.Point{{X: 0.5, Y: 100}, {X: 1.5, Y: 100}}},
		{"no elapsed recorded", []int{7, 8}, 0, []stats.Point{{X: 0.5, Y: 7}, {X: 1.5, Y: 8}}},
	} {
		if got := perSecondPoints(tc.counts, tc.elapsed); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
