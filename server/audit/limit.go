package audit

import (
	"sync"
	"time"
)

// RefusalsPerSecond bounds the refusal records a lockd writes a second: a
// client hammering an admin route it may not use is recorded, but does
// not flood the log; the next refusal recorded says how many were not.
const RefusalsPerSecond = 20

// refusalWindow counts refusal records in the current second.
type refusalWindow struct {
	mu      sync.Mutex
	start   time.Time
	written int
	missed  int
}

// allow decides whether a refusal at now is written, and how many were
// left out before it.
func (w *refusalWindow) allow(now time.Time) (ok bool, missedBefore int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start.IsZero() || now.Sub(w.start) >= time.Second || now.Before(w.start) {
		w.start, w.written = now, 0
	}
	if w.written >= RefusalsPerSecond {
		w.missed++
		return false, 0
	}
	w.written++
	missed := w.missed
	w.missed = 0
	return true, missed
}
