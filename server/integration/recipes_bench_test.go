package integration_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/lockservice/lockd/sdk"
)

func sortedDurations(d []time.Duration) []time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d
}

// BenchmarkRecipeLockUnlock: uncontended Mutex Lock+Unlock through the SDK,
// 5 replicas, production Raft timing, fsync on.
func BenchmarkRecipeLockUnlock(b *testing.B) {
	c, _ := benchSetup(b)
	ctx := context.Background()
	cl := newSDK(b, c, 12*time.Second)
	m := cl.NewMutex("/demo/bench/mutex")
	must(b, m.Lock(ctx)) // warm: session open, leader known
	must(b, m.Unlock(ctx))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	lat = sortedDurations(lat)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50_ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99_ms")
}

// BenchmarkRecipeHandoff: with `waiters` queued, each on its own session,
// the time from the holder's Unlock to the next holder's grant.
func BenchmarkRecipeHandoff(b *testing.B) {
	c, _ := benchSetup(b)
	waiters := benchWaiters
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	path := fmt.Sprintf("/demo/bench/handoff-%d", time.Now().UnixNano())
	granted := make(chan *sdk.Mutex, waiters)
	var lat []time.Duration
	first := newSDK(b, c, 12*time.Second).NewMutex(path)
	must(b, first.Lock(ctx))
	for i := 0; i < waiters; i++ {
		m := newSDK(b, c, 12*time.Second).NewMutex(path)
		go func() {
			if err := m.Lock(ctx); err == nil {
				granted <- m
			}
		}()
	}
	waitChildren(&testing.T{}, newSDK(b, c, 12*time.Second), path, waiters+1)
	b.ResetTimer()
	holder := first
	for i := 0; i < waiters; i++ {
		t0 := time.Now()
		must(b, holder.Unlock(ctx))
		holder = <-granted
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	must(b, holder.Unlock(ctx))
	b.ReportMetric(float64(waiters), "waiters")
	lat = sortedDurations(lat)
	b.ReportMetric(ms(percentile(lat, 0.50)), "handoff_p50_ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "handoff_p99_ms")
}
