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
	cb, err := setUpCache(ctx, e, n)
	if err != nil {
		return nil, err
	}
	defer cb.close()
	base, inval, err := cb.invalidationRounds(ctx, e)
	if err != nil {
		return nil, err
	}
	sentBefore, getsBefore := cacheMetrics(ctx, e.endpoints)
	hits0, misses0 := cb.cacheStats()
	rm, err := cb.readMostly(ctx, e)
	if err != nil {
		return nil, err
	}
	hits, misses := cb.cacheStats()
	hits, misses = hits-hits0, misses-misses0
	sentAfter, getsAfter := cacheMetrics(ctx, e.endpoints)
	return cacheResults(n, base, inval, rm, cacheCounts{hits, misses, sentAfter - sentBefore, getsAfter - getsBefore}), nil
}

// cacheBench is the cache scenario's clients and values: one writer with
// no cache, n readers with a session each, the cached key and the cold
// one nobody caches.
type cacheBench struct {
	n            int
	writer       *sdk.Client
	readers      []*sdk.Client
	closeReaders func()
	key, cold    string
}

// setUpCache connects the writer and the readers and creates both values.
func setUpCache(ctx context.Context, e *env, n int) (*cacheBench, error) {
	writer, err := sdk.New(ctx, writerConfig(e))
	if err != nil {
		return nil, err
	}
	readers, closeAll, err := e.sessionClients(ctx, n, "demo", nil)
	if err != nil {
		writer.Close()
		return nil, err
	}
	cb := &cacheBench{n: n, writer: writer, readers: readers, closeReaders: closeAll,
		key:  fmt.Sprintf("/demo/lockbench/%s/cached", e.run),
		cold: fmt.Sprintf("/demo/lockbench/%s/uncached", e.run)}
	for _, k := range []string{cb.key, cb.cold} {
		if _, err := writer.Put(ctx, k, []byte("0"), sdk.MakeParents()); err != nil {
			cb.close()
			return nil, err
		}
	}
	return cb, nil
}

// writerConfig is the cache writer's client: the run's admin client (its
// token, its route), with no cache of its own.
func writerConfig(e *env) sdk.Config {
	cfg := e.config()
	cfg.NoCache = true
	return cfg
}

// close closes the readers, then the writer.
func (cb *cacheBench) close() {
	cb.closeReaders()
	cb.writer.Close()
}

// readAll has every reader read the key (registering as its cacher), 64
// at a time.
func (cb *cacheBench) readAll(ctx context.Context) error {
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first atomic.Pointer[error]
	)
	n := cb.n
	for w := 0; w < min(64, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if _, err := cb.readers[i].Get(ctx, cb.key); err != nil {
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

// invalidationRounds times, round by round, a put to the cold value
// (base) and a put to the key every reader has just re-read (inval).
func (cb *cacheBench) invalidationRounds(ctx context.Context, e *env) (base, inval *stats.Recorder, err error) {
	const rounds = 30
	base, inval = stats.NewRecorder(time.Now()), stats.NewRecorder(time.Now())
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		t0 := time.Now()
		if _, err := cb.writer.Put(ctx, cb.cold, []byte(strconv.Itoa(r))); err != nil {
			return nil, nil, err
		}
		base.Add(time.Since(t0), time.Now())
		if err := cb.readAll(ctx); err != nil {
			return nil, nil, err
		}
		t0 = time.Now()
		if _, err := cb.writer.Put(ctx, cb.key, []byte(strconv.Itoa(r))); err != nil {
			return nil, nil, err
		}
		inval.Add(time.Since(t0), time.Now())
		e.progress("round %d/%d: write with %d cachers %v", r+1, rounds, cb.n, time.Since(t0).Round(time.Millisecond))
	}
	return base, inval, nil
}

// cacheMetrics reads the cluster's invalidations sent and gets served.
func cacheMetrics(ctx context.Context, endpoints []string) (sent, gets float64) {
	sent, _ = metricSum(ctx, endpoints, "lockd_cache_invalidations_sent_total", `cell="demo"`)
	gets, _ = metricSum(ctx, endpoints, "lockd_http_request_seconds_count", `route="`+api.RouteGet+`"`)
	return sent, gets
}

// cacheStats sums the readers' cache hits and misses.
func (cb *cacheBench) cacheStats() (hits, misses uint64) {
	for _, c := range cb.readers {
		st := c.CacheStats()
		hits, misses = hits+st.Hits, misses+st.Misses
	}
	return hits, misses
}

// readMostlyRun is what the read-mostly load measured.
type readMostlyRun struct {
	writes   *stats.Recorder
	elapsed  time.Duration
	readErrs int64
}

// readMostly runs the read-mostly load for the run's duration: every
// reader every 10 ms, one write a second.
func (cb *cacheBench) readMostly(ctx context.Context, e *env) (readMostlyRun, error) {
	rctx, cancel := context.WithTimeout(ctx, e.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var readErrs atomic.Int64
	for _, c := range cb.readers {
		wg.Add(1)
		go func(c *sdk.Client) {
			defer wg.Done()
			cb.readEvery10ms(rctx, c, &readErrs)
		}(c)
	}
	writes, err := cb.writeEverySecond(rctx)
	if err != nil {
		return readMostlyRun{}, err
	}
	wg.Wait()
	return readMostlyRun{writes: writes, elapsed: time.Since(start), readErrs: readErrs.Load()}, nil
}

// readEvery10ms reads the key every 10 ms until ctx ends, counting errors.
func (cb *cacheBench) readEvery10ms(ctx context.Context, c *sdk.Client, readErrs *atomic.Int64) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.Get(ctx, cb.key); err != nil && ctx.Err() == nil {
			readErrs.Add(1)
		}
	}
}

// writeEverySecond puts the key once a second until ctx ends.
func (cb *cacheBench) writeEverySecond(ctx context.Context) (*stats.Recorder, error) {
	writes := stats.NewRecorder(time.Now())
	for w := 0; ctx.Err() == nil; w++ {
		t0 := time.Now()
		if _, err := cb.writer.Put(ctx, cb.key, []byte(strconv.Itoa(1000+w))); err != nil {
			if ctx.Err() != nil {
				break
			}
			return nil, err
		}
		writes.Add(time.Since(t0), time.Now())
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return writes, nil
}

// cacheCounts are the read-mostly load's counters: the readers' cache
// hits and misses, the invalidations the cells sent and the gets the
// replicas served.
type cacheCounts struct {
	hits, misses uint64
	sent, gets   float64
}

// cacheResults reports the three cases.
func cacheResults(n int, base, inval *stats.Recorder, rm readMostlyRun, c cacheCounts) []report.Result {
	elapsed := rm.elapsed
	b, iv := base.Summarise(elapsed), inval.Summarise(elapsed)
	ws := rm.writes.Summarise(elapsed)
	return []report.Result{
		{Scenario: "cache", Case: "write to a value nobody caches", Params: map[string]string{"cachers": "0"}, Summary: b},
		{Scenario: "cache", Case: fmt.Sprintf("write to a value %d clients cache", n), Params: map[string]string{"cachers": strconv.Itoa(n)}, Summary: iv,
			Extra: map[string]float64{"added_p50_ms": iv.P50 - b.P50, "added_p99_ms": iv.P99 - b.P99}},
		{Scenario: "cache", Case: fmt.Sprintf("%d readers every 10 ms, one write a second", n), Params: map[string]string{"readers": strconv.Itoa(n)}, Summary: ws,
			Extra: map[string]float64{
				"hit_rate":            float64(c.hits) / float64(max(c.hits+c.misses, 1)),
				"reads_per_s":         float64(c.hits+c.misses) / elapsed.Seconds(),
				"client_misses_per_s": float64(c.misses) / elapsed.Seconds(),
				// Through proxies, a client's miss may be a hit in its
				// proxy's shared cache: count the reads the replicas got.
				"read_rpcs_to_cell_per_s":  c.gets / elapsed.Seconds(),
				"invalidations_sent_per_s": c.sent / elapsed.Seconds(),
				"read_errors":              float64(rm.readErrs),
			}},
	}
}
