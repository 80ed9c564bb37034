package integration_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// cachingClient is an SDK client with a session on demo, so its Gets there
// are cached.
func cachingClient(t *testing.T, c *cluster.Cluster) *sdk.Client {
	t.Helper()
	cl := newSDKClient(t, c)
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	_, err := cl.Session(ctx, "demo")
	must(t, err)
	return cl
}

func noCacheClient(t *testing.T, c *cluster.Cluster) *sdk.Client {
	t.Helper()
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), RequestTimeout: 5 * time.Second, NoCache: true})
	must(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// TestCachedReadsInvalidatedBeforeAWrite is the spec's scenario 2: readers
// read a config value once from the cell and then from their caches with
// no RPC; an operator's write returns only after every cacher dropped the
// old value, so each reader's next Get sees the new one; a watcher gets
// one event, re-reads the new value and re-arms in the same call.
func TestCachedReadsInvalidatedBeforeAWrite(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	const path = "/demo/config/flags"
	_, err := op.Put(ctx, path, []byte("v1"), sdk.MakeParents())
	must(t, err)

	readers := make([]*sdk.Client, 4)
	for i := range readers {
		readers[i] = cachingClient(t, c)
		for r := 0; r < 3; r++ {
			n, err := readers[i].Get(ctx, path)
			must(t, err)
			if string(n.Value) != "v1" {
				t.Fatalf("reader %d read %q, want v1", i, n.Value)
			}
		}
		if st := readers[i].CacheStats(); st.Misses != 1 || st.Hits != 2 {
			t.Fatalf("reader %d: %+v after three reads; want one read from the cell, two from the cache", i, st)
		}
	}
	node, exists, ch, err := readers[0].GetW(ctx, path)
	must(t, err)
	if !exists || string(node.Value) != "v1" {
		t.Fatalf("GetW: %q exists=%v", node.Value, exists)
	}

	for round := 2; round <= 4; round++ {
		want := fmt.Sprintf("v%d", round)
		_, err := op.Put(ctx, path, []byte(want))
		must(t, err)
		// The write has returned: no cache may still hold the old value.
		for i, r := range readers {
			n, err := r.Get(ctx, path)
			must(t, err)
			if string(n.Value) != want {
				t.Fatalf("round %d: reader %d read %q after the write of %q returned: a stale cached value", round, i, n.Value, want)
			}
		}
		select {
		case ev := <-ch:
			if ev.Type != api.EventDataChanged || ev.Path != path {
				t.Fatalf("watch event %+v", ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event for the write")
		}
		if _, ok := <-ch; ok {
			t.Fatal("a one-shot watch delivered a second event")
		}
		node, _, ch, err = readers[0].GetW(ctx, path) // re-read and re-arm in one call
		must(t, err)
		if string(node.Value) != want {
			t.Fatalf("re-read after the event: %q, want %q", node.Value, want)
		}
	}
	for i, r := range readers {
		t.Logf("reader %d: %+v", i, r.CacheStats())
	}
}

// TestCachedReadsLinearizable: many caching readers and one writer on a
// few keys; every read (from a cache or the cell) and write is recorded on
// one clock, and porcupine checks the history is linearizable, one
// register per key (the fault suite's checker).
func TestCachedReadsLinearizable(t *testing.T) {
	t.Parallel()
	cachedReadsLinearizable(t, cluster.Start(t, cluster.Options{}))
}

func cachedReadsLinearizable(t *testing.T, c *cluster.Cluster) {
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	var (
		mu  sync.Mutex
		ops []check.ConfigOp
	)
	start := time.Now()
	record := func(o check.ConfigOp) {
		mu.Lock()
		ops = append(ops, o)
		mu.Unlock()
	}
	const readers = 6
	keys := []string{"/demo/lin/a", "/demo/lin/b", "/demo/lin/c"}
	put := func(k, v string) {
		call := time.Since(start)
		n, err := op.Put(ctx, k, []byte(v), sdk.MakeParents())
		must(t, err)
		record(check.ConfigOp{Client: readers, Key: k, Kind: check.ConfigPut, Value: v, Call: call, Return: time.Since(start), Outcome: check.OutcomeOK, Version: n.Version})
	}
	for _, k := range keys {
		put(k, "0")
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var hits, misses atomic.Uint64
	for r := 0; r < readers; r++ {
		cl := cachingClient(t, c)
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer func() {
				st := cl.CacheStats()
				hits.Add(st.Hits)
				misses.Add(st.Misses)
			}()
			// Paced and bounded, so porcupine can decide the history.
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				k := keys[(i+r)%len(keys)]
				call := time.Since(start)
				n, err := cl.Get(ctx, k)
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				record(check.ConfigOp{Client: r, Key: k, Kind: check.ConfigGet, Call: call, Return: time.Since(start), Outcome: check.OutcomeOK, Exists: true, GotValue: string(n.Value), Version: n.Version})
			}
		}(r)
	}
	for i := 1; i <= 150; i++ {
		put(keys[i%len(keys)], fmt.Sprint(i))
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	res := check.CheckLinearizable(ops, time.Minute)
	t.Logf("%d operations checked, %d cache hits, %d misses: %v", res.Ops, hits.Load(), misses.Load(), res.Result)
	for _, v := range res.Violations {
		t.Errorf("%s", v.Detail)
	}
	if hits.Load() == 0 {
		t.Fatal("no read was served from a cache: the check proved nothing about caches")
	}
}

// TestDeadCacherDelaysAWriteByItsLease: a client that cached a value and
// then went silent (no KeepAlive, no acknowledgement) holds a write until
// the invalidation's deadline, one cache window after its last renewal
// (its 3 s lease is longer); the write then completes, and until then the
// old value stays readable.
func TestDeadCacherDelaysAWriteByItsLease(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{Lease: 3 * time.Second})
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	const path = "/demo/config/dead-cacher"
	_, err := op.Put(ctx, path, []byte("old"), sdk.MakeParents())
	must(t, err)

	// The cacher speaks the API directly: it opens a session, reads the
	// value as a cacher, renews once more, and then says nothing more.
	raw := c.NewClient()
	var sess api.SessionResponse
	mustDo(t, raw, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo", LeaseMS: 3000}, &sess)
	var got api.GetResponse
	mustDo(t, raw, api.RouteGet, api.ReadRequest{Path: path, Session: sess.Session, Secret: sess.Secret, Cache: true, CacheWindowMS: api.CacheWindow.Milliseconds()}, &got)
	if !got.Cacheable {
		t.Fatalf("a read by a caching session was not cacheable: %+v", got)
	}
	renewed := time.Now() // the leader's last renewal of it is later
	var ka api.SessionResponse
	mustDo(t, raw, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: sess.Session, Secret: sess.Secret}, &ka)

	window := api.CacheWindowFor(3 * time.Second) // the leader's, for this lease
	waited := writeHeldByASilentCacher(ctx, t, op, path, renewed.Add(window), "a cacher that never acknowledged")
	t.Logf("the write waited %v for the silent cacher (window %v, lease 3 s)", waited, window)
	n, err := op.Get(ctx, path)
	must(t, err)
	if string(n.Value) != "new" {
		t.Fatalf("after the write: %q", n.Value)
	}
}

// writeHeldByASilentCacher writes "new" to path (holding "old"), which a
// silent cacher (who) may serve from its cache until notBefore: the write
// must not complete before then, a read that returns before then must
// still see "old", and the write must complete within 30 s. It returns
// how long the write waited. Each check is judged by the clock, not by a
// fixed sleep, so a slow machine cannot fail it; the write must begin
// before notBefore, else it could show nothing.
func writeHeldByASilentCacher(ctx context.Context, t *testing.T, op *sdk.Client, path string, notBefore time.Time, who string) time.Duration {
	t.Helper()
	written := make(chan error, 1)
	began := time.Now()
	if !began.Before(notBefore) {
		t.Fatalf("inconclusive: the write would begin %v after %s may have stopped serving", began.Sub(notBefore), who)
	}
	go func() {
		_, err := op.Put(ctx, path, []byte("new"))
		written <- err
	}()
	// A read halfway: if it returns before notBefore it must be the old
	// value (linearizable: the write cannot have committed yet).
	time.Sleep(notBefore.Sub(began) / 2)
	n, err := op.Get(ctx, path)
	must(t, err)
	if read := time.Now(); read.Before(notBefore) && string(n.Value) != "old" {
		t.Fatalf("read %q %v before %s may have stopped serving the old value", n.Value, notBefore.Sub(read), who)
	}
	select {
	case err := <-written:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the write still waits 30 s after %s went silent", who)
	}
	if done := time.Now(); done.Before(notBefore) {
		t.Fatalf("the write completed %v before %s may have stopped serving the old value", notBefore.Sub(done), who)
	}
	return time.Since(began).Round(time.Millisecond)
}

// TestCacheFlushedOnFailover: readers cache a value; the leader is killed;
// a write under the new leader is followed by reads that must all see it
// (the readers flushed on the fail-over, and the new leader waited for
// them to learn of it before the write committed).
func TestCacheFlushedOnFailover(t *testing.T) {
	t.Parallel()
	cacheFlushedOnFailover(t, cluster.Start(t, cluster.Options{}))
}

func cacheFlushedOnFailover(t *testing.T, c *cluster.Cluster) {
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	const path = "/demo/config/failover"
	_, err := op.Put(ctx, path, []byte("before"), sdk.MakeParents())
	must(t, err)
	readers := make([]*sdk.Client, 3)
	for i := range readers {
		readers[i] = cachingClient(t, c)
		for r := 0; r < 2; r++ {
			_, err := readers[i].Get(ctx, path)
			must(t, err)
		}
	}
	leader, err := c.LeaderOf("demo")
	must(t, err)
	must(t, c.Kill(leader))
	// The first attempt may die with the leader (outcome unknown): the
	// put is idempotent, so it is sent until it is acknowledged.
	for attempt := 0; ; attempt++ {
		if _, err = op.Put(ctx, path, []byte("after")); err == nil {
			break
		}
		if attempt == 20 {
			t.Fatalf("no write acknowledged after the fail-over: %v", err)
		}
	}
	for i, r := range readers {
		n, err := r.Get(ctx, path)
		must(t, err)
		if string(n.Value) != "after" {
			t.Fatalf("reader %d read %q after a fail-over and a write: a stale cached value", i, n.Value)
		}
	}
}
