package httpapi

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
)

// TestRefresherCoalesces: a flood of callers (each an unknown token)
// costs at most one directory read per api.DirectoryRefreshGap, one at a
// time, and every caller is answered by a read that started after it
// asked. Fails on mutant lockd_broken_refreshgap. It runs on a synctest
// bubble's clock: the gaps and the reads' millisecond pass without waiting.
func TestRefresherCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads, inFlight, maxInFlight atomic.Int64
		var mu sync.Mutex
		var starts []time.Time
		r := &refresher{gap: api.DirectoryRefreshGap, read: func(context.Context) {
			n := inFlight.Add(1)
			for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
			}
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			reads.Add(1)
			time.Sleep(time.Millisecond)
			inFlight.Add(-1)
		}}
		const callers, rounds = 50, 40
		begin := time.Now()
		var wg sync.WaitGroup
		var stale atomic.Int64
		for range callers {
			wg.Go(func() {
				for range rounds {
					asked := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					r.refresh(ctx)
					cancel()
					mu.Lock()
					last := starts[len(starts)-1]
					mu.Unlock()
					if last.Before(asked) {
						stale.Add(1)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(begin)
		bound := int64(elapsed/api.DirectoryRefreshGap) + 2
		t.Logf("%d calls in %v: %d reads (bound %d), at most %d at once", callers*rounds, elapsed, reads.Load(), bound, maxInFlight.Load())
		if reads.Load() > bound {
			t.Fatalf("%d directory reads in %v: more than one per %v", reads.Load(), elapsed, api.DirectoryRefreshGap)
		}
		if maxInFlight.Load() != 1 {
			t.Fatalf("%d reads ran at once", maxInFlight.Load())
		}
		if stale.Load() != 0 {
			t.Fatalf("%d callers were answered by a read that started before they asked", stale.Load())
		}
	})
}

// TestRefreshForReadsAgainAfterAFailedRead: a request whose token or cell
// is unknown is not refused for one directory read that failed (the
// directory group handing its leadership over answers at once): it waits
// for another, up to refreshReads (TestTenantsACLsAndQuotas refused a
// token made a moment before, in 0.1 s, under make test's load).
func TestRefreshForReadsAgainAfterAFailedRead(t *testing.T) {
	var reads atomic.Int32
	s := &Server{}
	s.dir.read = func(context.Context) { reads.Add(1) }
	if !s.refreshFor(func() bool { return reads.Load() >= 2 }) {
		t.Fatalf("refused after %d reads; the second would have found it", reads.Load())
	}
	reads.Store(0)
	if s.refreshFor(func() bool { return false }) || reads.Load() != refreshReads {
		t.Fatalf("never found: %d reads, want %d", reads.Load(), refreshReads)
	}
}
