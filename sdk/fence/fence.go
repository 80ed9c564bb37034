// Package fence is the resource side of fencing: whatever a lock protects
// keeps the highest token it has accepted for each lock and refuses any
// write carrying a lower one. That is the only thing that stops a holder
// that was paused past its lease from writing after someone else took over.
//
// A new holder's first act must be a fenced write that raises the mark
// (Accept with its token, a no-op write, or the SQL Advance) before it reads
// any state it will act on. Anything the old holder wrote before that point
// is ordered before the new holder's view, which is the same as the old
// holder having finished in time; anything after is refused.
package fence

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrStaleToken is returned for a token lower than one already accepted.
var ErrStaleToken = errors.New("fence: stale fencing token")

// StaleError says which token was refused and what the mark is.
type StaleError struct {
	Lock           string
	Token, Highest uint64
}

func (e *StaleError) Error() string {
	if e.Highest == 0 { // not known (an SQL fence read without a Querier)
		return fmt.Sprintf("fence: token %d for %s is below the accepted one", e.Token, e.Lock)
	}
	return fmt.Sprintf("fence: token %d for %s is below the accepted %d", e.Token, e.Lock, e.Highest)
}

// Is makes errors.Is(err, ErrStaleToken) work.
func (e *StaleError) Is(target error) bool { return target == ErrStaleToken }

// Fence keeps the highest accepted token per lock in memory, for resources
// that live in one process. A resource with its own storage keeps the mark
// next to its data instead (see SQL) so that the check and the write are one
// transaction.
type Fence struct {
	mu       sync.Mutex // guards marks; each mark has its own lock
	marks    map[string]*mark
	rejected *prometheus.CounterVec
}

type mark struct {
	mu      sync.Mutex
	highest uint64
}

// RejectionsMetric is the counter of refused tokens, labelled by lock.
// Zero over months on a busy lock usually means the check was never wired in.
const RejectionsMetric = "lockd_fence_rejections_total"

// NewRejectionCounter makes the rejections counter; register it once per
// process and share it between fences.
func NewRejectionCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: RejectionsMetric,
		Help: "Writes refused because their fencing token was below the highest accepted for the lock.",
	}, []string{"lock"})
}

// New returns an empty fence counting rejections on rejected (may be nil).
func New(rejected *prometheus.CounterVec) *Fence {
	return &Fence{marks: map[string]*mark{}, rejected: rejected}
}

func (f *Fence) mark(lock string) *mark {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.marks[lock]
	if !ok {
		m = &mark{}
		f.marks[lock] = m
	}
	return m
}

func (f *Fence) stale(lock string, token, highest uint64) error {
	if f.rejected != nil {
		f.rejected.WithLabelValues(lock).Inc()
	}
	return &StaleError{Lock: lock, Token: token, Highest: highest}
}

// Accept admits token for lock if it is at least the highest accepted so
// far, and raises the mark to it. The same token may write any number of
// times. The caller performs its write only if Accept returns nil, under
// whatever serialises its writes (Accept itself is atomic).
func (f *Fence) Accept(lock string, token uint64) error {
	return f.Do(lock, token, nil)
}

// Do runs write only if token is admitted, holding the lock's mark across
// the check and the write, so no lower token can interleave. The mark is
// raised only if write succeeds.
func (f *Fence) Do(lock string, token uint64, write func() error) error {
	m := f.mark(lock)
	m.mu.Lock()
	defer m.mu.Unlock()
	if token < m.highest {
		return f.stale(lock, token, m.highest)
	}
	if write != nil {
		if err := write(); err != nil {
			return err
		}
	}
	m.highest = token
	return nil
}

// Highest returns the mark for lock (0 if none).
func (f *Fence) Highest(lock string) uint64 {
	m := f.mark(lock)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.highest
}
