// Package stats summarises benchmark samples: latency percentiles, a
// latency CDF for charts, and throughput over time. It is pure: callers
// record, then summarise.
package stats

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Recorder collects latency samples and their completion times. It is safe
// for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	lat   []time.Duration
	done  []time.Duration // completion offsets from start, for the rate series
	errs  int
}

// NewRecorder starts a recorder whose time series begins at start.
func NewRecorder(start time.Time) *Recorder { return &Recorder{start: start} }

// Add records one operation that took d and completed at end.
func (r *Recorder) Add(d time.Duration, end time.Time) {
	r.mu.Lock()
	r.lat = append(r.lat, d)
	r.done = append(r.done, end.Sub(r.start))
	r.mu.Unlock()
}

// Error counts one failed operation.
func (r *Recorder) Error() {
	r.mu.Lock()
	r.errs++
	r.mu.Unlock()
}

// Summary is what a run of one operation measured.
type Summary struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	Rate   float64 `json:"rate_per_s"` // completed operations per second of elapsed
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	P999   float64 `json:"p999_ms"`
	Max    float64 `json:"max_ms"`
	Mean   float64 `json:"mean_ms"`
	// CDF is latency (ms) at evenly spaced quantiles, for charts.
	CDF []Point `json:"cdf"`
	// PerSecond is completions in each second since start; the last
	// second is partial unless ElapsedS is whole.
	PerSecond []int `json:"per_second"`
	// ElapsedS is the seconds summarised over.
	ElapsedS float64 `json:"elapsed_s,omitempty"`
}

// Point is one point of a chart.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Summarise summarises every sample over elapsed; the per-second series
// starts at the recorder's start.
func (r *Recorder) Summarise(elapsed time.Duration) Summary {
	r.mu.Lock()
	lat := slices.Clone(r.lat)
	done := slices.Clone(r.done)
	errs := r.errs
	r.mu.Unlock()
	return summarise(lat, done, errs, elapsed)
}

// SummariseWindow summarises only the samples that completed in the
// measured window [from, from+elapsed]: a recorder that ran before the
// measurement began (while sessions were opened) or after it ended (while
// its workers were stopped) reports the window alone, and its per-second
// series starts at from. Errors are counted over the recorder's life.
func (r *Recorder) SummariseWindow(from time.Time, elapsed time.Duration) Summary {
	r.mu.Lock()
	lat, done := InWindow(r.lat, r.done, from.Sub(r.start), elapsed)
	errs := r.errs
	r.mu.Unlock()
	return summarise(lat, done, errs, elapsed)
}

// InWindow keeps the samples whose completion offset lies in [offset,
// offset+elapsed], and returns their completions relative to offset.
func InWindow(lat, done []time.Duration, offset, elapsed time.Duration) (keptLat, keptDone []time.Duration) {
	for i, d := range done {
		if d < offset || d > offset+elapsed {
			continue
		}
		keptLat = append(keptLat, lat[i])
		keptDone = append(keptDone, d-offset)
	}
	return keptLat, keptDone
}

func summarise(lat, done []time.Duration, errs int, elapsed time.Duration) Summary {
	slices.Sort(lat)
	s := Summary{N: len(lat), Errors: errs, Rate: Rate(len(lat), elapsed), ElapsedS: elapsed.Seconds()}
	if len(lat) == 0 {
		return s
	}
	s.P50, s.P99, s.P999 = ms(Percentile(lat, 0.50)), ms(Percentile(lat, 0.99)), ms(Percentile(lat, 0.999))
	s.Max = ms(lat[len(lat)-1])
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	s.Mean = ms(sum / time.Duration(len(lat)))
	s.CDF = CDF(lat, 100)
	s.PerSecond = PerSecond(done, elapsed)
	return s
}

// Percentile returns the nearest-rank q-quantile (0 < q ≤ 1) of sorted:
// the smallest sample with at least q of all samples at or below it.
// Zero for no samples.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// CDF returns up to points (latency ms, cumulative fraction) pairs of
// sorted, always including the first and the last sample.
func CDF(sorted []time.Duration, points int) []Point {
	n := len(sorted)
	if n == 0 || points < 2 {
		return nil
	}
	if n == 1 {
		return []Point{{X: ms(sorted[0]), Y: 1}}
	}
	points = min(points, n)
	out := make([]Point, 0, points)
	for i := 0; i < points; i++ {
		idx := i * (n - 1) / (points - 1)
		out = append(out, Point{X: ms(sorted[idx]), Y: float64(idx+1) / float64(n)})
	}
	return out
}

// PerSecond counts completions (offsets from the start) in each whole
// second of elapsed. A completion outside [0, elapsed] is not counted: it
// belongs to no second of the measurement (piling such completions into
// the last second drew a spike there).
func PerSecond(done []time.Duration, elapsed time.Duration) []int {
	secs := int(math.Ceil(elapsed.Seconds()))
	if secs <= 0 {
		return nil
	}
	out := make([]int, secs)
	for _, d := range done {
		if d < 0 || d > elapsed {
			continue
		}
		out[min(int(d/time.Second), secs-1)]++
	}
	return out
}

// Rate is n per second of elapsed; zero for no time.
func Rate(n int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(n) / elapsed.Seconds()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
