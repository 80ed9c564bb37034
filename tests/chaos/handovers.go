package chaos

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/lockservice/lockd/api"
)

// The planned leadership hand-overs the lockds made during the run
// (leader balancing, clean stops: server/cell/handover.go), from their
// lockd_handovers_total and lockd_handovers_failed_total, sampled with
// the hostile figures.

// counterSum is a counter summed over processes that restart: a value
// below the last one seen means the process restarted, and the new value
// counts whole (what it counted between its restart and the sample).
type counterSum struct {
	last  map[string]float64
	total float64
}

func (c *counterSum) observe(process string, v float64) {
	if c.last == nil {
		c.last = map[string]float64{}
	}
	if prev, seen := c.last[process]; seen && v >= prev {
		c.total += v - prev
	} else {
		c.total += v
	}
	c.last[process] = v
}

// metricSum is the sum of every series of metric name (any labels) in a
// Prometheus text exposition.
func metricSum(b []byte, name string) float64 {
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			v, _ := strconv.ParseFloat(rest[i+1:], 64)
			sum += v
		}
	}
	return sum
}

// sampleHandOvers adds every lockd's hand-overs since the last sample.
func (x *hostile) sampleHandOvers(ctx context.Context) {
	for _, l := range x.lockds {
		st, b := x.send(ctx, l, http.MethodGet, api.RouteMetrics, nil, "")
		if st != http.StatusOK {
			continue
		}
		moved, failed := metricSum(b, "lockd_handovers_total"), metricSum(b, "lockd_handovers_failed_total")
		x.mu.Lock()
		x.handOvers.observe(l, moved)
		x.handOversFailed.observe(l, failed)
		x.figures.HandOvers, x.figures.HandOversFailed = x.handOvers.total, x.handOversFailed.total
		x.mu.Unlock()
	}
}
