// Package recent keeps bounded windows of recent figures (latencies,
// events) for the health assessment: a quantile or a count over the last
// minute, read rarely, written on hot paths at the cost of a mutex. Times
// are kept on the monotonic clock (a wall-clock step empties nothing).
package recent

import (
	"slices"
	"sync"
	"time"
)

// MaxSamples bounds the samples a Window keeps: past it the oldest go
// first, so a quantile covers at most the latest MaxSamples.
const MaxSamples = 1024

// Window is a ring of timestamped values. The zero value is ready.
type Window struct {
	mu   sync.Mutex
	base time.Time         // the first Add: times are offsets from it
	at   [MaxSamples]int64 // ns since base
	val  [MaxSamples]float64
	next int
	n    int
}

// Add records v at now.
func (w *Window) Add(now time.Time, v float64) {
	w.mu.Lock()
	if w.base.IsZero() {
		w.base = now
	}
	w.at[w.next], w.val[w.next] = int64(now.Sub(w.base)), v
	w.next = (w.next + 1) % MaxSamples
	w.n = min(w.n+1, MaxSamples)
	w.mu.Unlock()
}

// since returns the values recorded after now-span, newest first.
func (w *Window) since(now time.Time, span time.Duration) []float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		return nil
	}
	from := int64(now.Sub(w.base) - span)
	out := make([]float64, 0, w.n)
	for i := range w.n {
		j := (w.next - 1 - i + MaxSamples) % MaxSamples
		if w.at[j] <= from {
			break // older than every one before it in the walk
		}
		out = append(out, w.val[j])
	}
	return out
}

// Quantile is the q-quantile (0 < q ≤ 1, nearest rank) of the values
// recorded in the span before now, and how many there were.
func (w *Window) Quantile(now time.Time, span time.Duration, q float64) (float64, int) {
	vs := w.since(now, span)
	if len(vs) == 0 {
		return 0, 0
	}
	slices.Sort(vs)
	rank := int(q*float64(len(vs))+0.999999) - 1
	return vs[min(max(rank, 0), len(vs)-1)], len(vs)
}

// Over is how many values recorded in the span before now exceed limit,
// and how many there were in all.
func (w *Window) Over(now time.Time, span time.Duration, limit float64) (over, all int) {
	vs := w.since(now, span)
	for _, v := range vs {
		if v > limit {
			over++
		}
	}
	return over, len(vs)
}

// Count is how many values were recorded in the span before now (at
// most MaxSamples).
func (w *Window) Count(now time.Time, span time.Duration) int {
	return len(w.since(now, span))
}
