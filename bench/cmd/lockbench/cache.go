package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// cacheScenario measures the client cache with n caching clients (one
// session each) on one config value:
//   - what invalidating n cachers adds to a write: puts to a value nobody
//     caches, then puts to the value every client has just re-read;
//   - a read-mostly workload (each client reads every 10 ms, one write a
//     second): the hit rate, and the read RPCs that reach the cell.
func cacheScenario(ctx context.Context, e *env, n int) ([]report.Result, error) {
	writer, err := sdk.New(ctx, sdk.Config{Endpoints: e.endpoints, Lease: e.lease, NoCache: true})
	if err != nil {
		return nil, err
	}
	defer writer.Close()
	readers, closeAll, err := e.sessionClients(ctx, n, "demo", nil)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	key := fmt.Sprintf("/demo/lockbench/%s/cached", e.run)
	cold := fmt.Sprintf("/demo/lockbench/%s/uncached", e.run)
	for _, k := range []string{key, cold} {
		if _, err := writer.Put(ctx, k, []byte("0"), sdk.MakeParents()); err != nil {
			return nil, err
		}
	}
	// every reader reads the key (registering as its cacher), 64 at a time
	readAll := func() error {
		var (
			wg    sync.WaitGroup
			next  atomic.Int64
			first atomic.Pointer[error]
		)
		for w := 0; w < min(64, n); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					if _, err := readers[i].Get(ctx, key); err != nil {
						first.CompareAndSwap(nil, &err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if p := first.Load(); p != nil {
			return *p
		}
		return nil
	}
	const rounds = 30
	base, inval := stats.NewRecorder(time.Now()), stats.NewRecorder(time.Now())
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		t0 := time.Now()
		if _, err := writer.Put(ctx, cold, []byte(strconv.Itoa(r))); err != nil {
			return nil, err
		}
		base.Add(time.Since(t0), time.Now())
		if err := readAll(); err != nil {
			return nil, err
		}
		t0 = time.Now()
		if _, err := writer.Put(ctx, key, []byte(strconv.Itoa(r))); err != nil {
			return nil, err
		}
		inval.Add(time.Since(t0), time.Now())
		e.progress("round %d/%d: write with %d cachers %v", r+1, rounds, n, time.Since(t0).Round(time.Millisecond))
	}
	sentBefore, _ := metricSum(ctx, e.endpoints, "lockd_cache_invalidations_sent_total", `cell="demo"`)
	getsBefore, _ := metricSum(ctx, e.endpoints, "lockd_http_request_seconds_count", `route="`+api.RouteGet+`"`)

	// Read-mostly: every reader every 10 ms, one write a second.
	var hits0, misses0 uint64
	for _, c := range readers {
		st := c.CacheStats()
		hits0, misses0 = hits0+st.Hits, misses0+st.Misses
	}
	rctx, cancel := context.WithTimeout(ctx, e.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var readErrs atomic.Int64
	for _, c := range readers {
		wg.Add(1)
		go func(c *sdk.Client) {
			defer wg.Done()
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-rctx.Done():
					return
				case <-t.C:
				}
				if _, err := c.Get(rctx, key); err != nil && rctx.Err() == nil {
					readErrs.Add(1)
				}
			}
		}(c)
	}
	writes := stats.NewRecorder(time.Now())
	for w := 0; rctx.Err() == nil; w++ {
		t0 := time.Now()
		if _, err := writer.Put(rctx, key, []byte(strconv.Itoa(1000+w))); err != nil {
			if rctx.Err() != nil {
				break
			}
			return nil, err
		}
		writes.Add(time.Since(t0), time.Now())
		select {
		case <-rctx.Done():
		case <-time.After(time.Second):
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	var hits, misses uint64
	for _, c := range readers {
		st := c.CacheStats()
		hits, misses = hits+st.Hits, misses+st.Misses
	}
	hits, misses = hits-hits0, misses-misses0
	sentAfter, _ := metricSum(ctx, e.endpoints, "lockd_cache_invalidations_sent_total", `cell="demo"`)
	getsAfter, _ := metricSum(ctx, e.endpoints, "lockd_http_request_seconds_count", `route="`+api.RouteGet+`"`)
	b, iv := base.Summarise(elapsed), inval.Summarise(elapsed)
	ws := writes.Summarise(elapsed)
	return []report.Result{
		{Scenario: "cache", Case: "write to a value nobody caches", Params: map[string]string{"cachers": "0"}, Summary: b},
		{Scenario: "cache", Case: fmt.Sprintf("write to a value %d clients cache", n), Params: map[string]string{"cachers": strconv.Itoa(n)}, Summary: iv,
			Extra: map[string]float64{"added_p50_ms": iv.P50 - b.P50, "added_p99_ms": iv.P99 - b.P99}},
		{Scenario: "cache", Case: fmt.Sprintf("%d readers every 10 ms, one write a second", n), Params: map[string]string{"readers": strconv.Itoa(n)}, Summary: ws,
			Extra: map[string]float64{
				"hit_rate":            float64(hits) / float64(max(hits+misses, 1)),
				"reads_per_s":         float64(hits+misses) / elapsed.Seconds(),
				"client_misses_per_s": float64(misses) / elapsed.Seconds(),
				// Through proxies, a client's miss may be a hit in its
				// proxy's shared cache: count the reads the replicas got.
				"read_rpcs_to_cell_per_s":  (getsAfter - getsBefore) / elapsed.Seconds(),
				"invalidations_sent_per_s": (sentAfter - sentBefore) / elapsed.Seconds(),
				"read_errors":              float64(readErrs.Load()),
			}},
	}, nil
}
