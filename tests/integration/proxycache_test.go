package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// proxyCachingClient is a client through the proxies with a session on
// demo whose KeepAlives a proxy has answered, so its Gets are cached
// there (once its next KeepAlive names that proxy).
func proxyCachingClient(t *testing.T, c *cluster.Cluster) *sdk.Client {
	t.Helper()
	cl := proxyClient(t, c, 0)
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	s, err := cl.Session(ctx, "demo")
	must(t, err)
	for i := 0; s.Proxy() == ""; i++ {
		if i == 300 {
			t.Fatal("no KeepAlive answered by a proxy within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cl
}

// warmCache reads path until the client serves it from its cache (its
// session's KeepAlives have been answered by the proxy, which granted it
// a cache), bounded in count and time.
func warmCache(ctx context.Context, t *testing.T, cl *sdk.Client, path, want string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		before := cl.CacheStats().Hits
		n, err := cl.Get(ctx, path)
		must(t, err)
		if string(n.Value) != want {
			t.Fatalf("read %q, want %q", n.Value, want)
		}
		if cl.CacheStats().Hits > before {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, a := range cl.Directory().Proxies {
		t.Logf("%s: requests %v hits %v misses %v", a.Name, scrape(t, a.APIAddr, "lockproxy_requests_total", ""), scrape(t, a.APIAddr, "lockproxy_cache_hits_total", ""), scrape(t, a.APIAddr, "lockproxy_cache_misses_total", ""))
	}
	s, _ := cl.Session(ctx, "demo")
	t.Fatalf("%s never served from the client's cache through the proxy (%+v, keepalives through %q)", path, cl.CacheStats(), s.Proxy())
}

// TestProxySharedCacheAndWatches is the spec's scenario 2 through one
// proxy: readers behind it read a config value, which reaches the cell
// once (the proxy's shared cache serves the rest) and is then served from
// the readers' own caches with no RPC; their watches on it are one watch
// at the cell. An operator's write returns only after every reader
// dropped the old value; each watcher gets one event, re-reads the new
// value and re-arms in the same call.
func TestProxySharedCacheAndWatches(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	proxies := startProxies(t, c, 1)
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	const path = "/demo/config/shared"
	_, err := op.Put(ctx, path, []byte("v1"), sdk.MakeParents())
	must(t, err)

	readers := make([]*sdk.Client, 8)
	for i := range readers {
		readers[i] = proxyCachingClient(t, c)
		warmCache(ctx, t, readers[i], path, "v1")
	}
	paddr := proxies[0].Addr
	misses, hits := scrape(t, paddr, "lockproxy_cache_misses_total", ""), scrape(t, paddr, "lockproxy_cache_hits_total", "")
	t.Logf("proxy shared cache: %v reads sent to the cell, %v served from it", misses, hits)
	// One read reaches the cell, unless the proxy's own 1.5 s cache grant
	// lapsed between readers (a KeepAlive late on a loaded machine: the
	// proxy then drops its cache, as it must), which costs one more each
	// time. Without the shared cache every reader's first read would.
	if misses < 1 || misses > float64(len(readers))/2 {
		t.Fatalf("%v of the %d readers' reads reached the cell; the proxy's shared cache should have sent one (one more per lapse of its grant)", misses, len(readers))
	}
	// Each read the proxy answered from its shared cache says so (api
	// GetResponse.Shared): what the fault suite counts as a read with no
	// quorum needed.
	var shared uint64
	for _, r := range readers {
		shared += r.CacheStats().SharedHits
	}
	if float64(shared) != hits || shared == 0 {
		t.Fatalf("the readers saw %d reads answered from the proxy's shared cache, the proxy counts %v hits", shared, hits)
	}

	watches := make([]<-chan api.Event, len(readers))
	for i, r := range readers {
		n, exists, ch, err := r.GetW(ctx, path)
		must(t, err)
		if !exists || string(n.Value) != "v1" {
			t.Fatalf("reader %d GetW: %q exists=%v", i, n.Value, exists)
		}
		watches[i] = ch
	}
	if held := scrape(t, paddr, "lockproxy_client_watches", ""); held != float64(len(readers)) {
		t.Fatalf("the proxy holds %v watches for its clients, want %d", held, len(readers))
	}
	leader, err := c.LeaderOf("demo")
	must(t, err)
	if armed := scrape(t, c.APIAddr(leader), "lockd_watches_armed", "demo"); armed != 1 {
		t.Fatalf("the leader holds %v watches for %d clients watching one path through one proxy, want 1", armed, len(readers))
	}

	for round := 2; round <= 4; round++ {
		want := fmt.Sprintf("v%d", round)
		_, err := op.Put(ctx, path, []byte(want))
		must(t, err)
		// The write has returned: no reader may still serve the old value.
		for i, r := range readers {
			n, err := r.Get(ctx, path)
			must(t, err)
			if string(n.Value) != want {
				t.Fatalf("round %d: reader %d read %q after the write of %q returned: a stale cached value", round, i, n.Value, want)
			}
		}
		for i, r := range readers {
			select {
			case ev := <-watches[i]:
				if ev.Type != api.EventDataChanged || ev.Path != path {
					t.Fatalf("round %d: reader %d's watch event %+v", round, i, ev)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d: reader %d got no watch event for the write", round, i)
			}
			if _, ok := <-watches[i]; ok {
				t.Fatal("a one-shot watch delivered a second event")
			}
			n, _, ch, err := r.GetW(ctx, path) // re-read and re-arm in one call
			must(t, err)
			if string(n.Value) != want {
				t.Fatalf("round %d: reader %d re-read %q after the event, want %q", round, i, n.Value, want)
			}
			watches[i] = ch
		}
	}
	t.Logf("invalidations passed on by the proxy: %v", scrape(t, paddr, "lockproxy_invalidations_sent_total", ""))
	// The leader's commit metrics saw the writes.
	leader, err = c.LeaderOf("demo")
	must(t, err)
	n, sum := scrape(t, c.APIAddr(leader), "lockd_commit_seconds_count", "demo"), scrape(t, c.APIAddr(leader), "lockd_commit_seconds_sum", "demo")
	if n < 3 || scrape(t, c.APIAddr(leader), "lockd_proposals_total", "demo") < n {
		t.Fatalf("lockd_commit_seconds_count %v after 3 writes (proposals %v)", n, scrape(t, c.APIAddr(leader), "lockd_proposals_total", "demo"))
	}
	t.Logf("leader: %v commits, mean %.2f ms", n, 1000*sum/n)
}

// TestProxySilentClientDelaysAWrite: a client that read a value cacheable
// through a proxy and then went silent holds a write (the proxy does not
// acknowledge the invalidation for it) until the cache grant the proxy
// gave it has run out — within its lease; until then the old value stays
// readable, and then the write completes.
func TestProxySilentClientDelaysAWrite(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	proxies := startProxies(t, c, 1)
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	const path = "/demo/config/silent-client"
	_, err := op.Put(ctx, path, []byte("old"), sdk.MakeParents())
	must(t, err)

	// The client speaks the API to the proxy directly: it opens a
	// session, reads the value as a cacher, is granted a cache, and then
	// says nothing more.
	raw := cluster.NewClient(proxies[0].Addr)
	var sess api.SessionResponse
	mustDo(t, raw, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo"}, &sess)
	var ka api.SessionResponse
	mustDo(t, raw, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: sess.Session, Secret: sess.Secret}, &ka)
	// The next KeepAlive names the proxy: the client speaks its protocol.
	mustDo(t, raw, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: sess.Session, Secret: sess.Secret, Proxy: ka.Proxy}, &ka)
	var got api.GetResponse
	mustDo(t, raw, api.RouteGet, api.ReadRequest{Path: path, Session: sess.Session, Secret: sess.Secret, Cache: true, CacheWindowMS: api.CacheWindow.Milliseconds()}, &got)
	if !got.Cacheable || got.Proxy == "" || got.Proxy != ka.Proxy {
		t.Fatalf("a cached read through the proxy: %+v (keepalive reply named proxy %q)", got, ka.Proxy)
	}
	sent := time.Now() // the client counts its grant from here
	mustDo(t, raw, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: sess.Session, Secret: sess.Secret, Proxy: ka.Proxy}, &ka)
	if ka.CacheMS <= 0 {
		t.Fatalf("the proxy granted no cache: %+v", ka)
	}
	granted := time.Duration(ka.CacheMS) * time.Millisecond

	waited := writeHeldByASilentCacher(ctx, t, op, path, sent.Add(granted), fmt.Sprintf("a client the proxy granted %v of cache", granted))
	t.Logf("the write waited %v for the silent client (granted %v)", waited, granted)
}

// TestProxyKillMovesWatches: readers cache and watch a value through two
// proxies; the proxy holding most of their watches is killed with kill -9;
// a write then completes (after the dead proxy's lease at most), the
// readers move to the other proxy inside their lease, re-arm their
// watches there, every one gets its event for the write, and no reader
// serves the old value.
func TestProxyKillMovesWatches(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	proxies := startProxies(t, c, 2)
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	const path = "/demo/config/moving"
	_, err := op.Put(ctx, path, []byte("v1"), sdk.MakeParents())
	must(t, err)
	readers := make([]*sdk.Client, 6)
	watches := make([]<-chan api.Event, len(readers))
	for i := range readers {
		readers[i] = proxyCachingClient(t, c)
		warmCache(ctx, t, readers[i], path, "v1")
		_, _, watches[i], err = readers[i].GetW(ctx, path)
		must(t, err)
	}
	victim := proxies[0]
	if scrape(t, proxies[1].Addr, "lockproxy_client_watches", "") > scrape(t, victim.Addr, "lockproxy_client_watches", "") {
		victim = proxies[1]
	}
	held := scrape(t, victim.Addr, "lockproxy_client_watches", "")
	must(t, victim.Kill())
	t.Logf("killed %s holding %v of %d watches", victim.Name, held, len(readers))
	// The dead proxy's own session still caches the value: the write
	// waits for it at most its lease (TestDeadCacherDelaysAWriteByItsLease
	// for a proxy). Its readers move to the other proxy (a KeepAlive fails
	// on the dead one), flush and re-arm their watches there, each as of
	// its index, so each fires for the write whenever it came.
	began := time.Now()
	_, err = op.Put(ctx, path, []byte("v2"))
	must(t, err)
	t.Logf("the write after the kill took %v (lease 3 s)", time.Since(began).Round(time.Millisecond))
	for i, r := range readers {
		select {
		case ev := <-watches[i]:
			if ev.Type != api.EventDataChanged && ev.Type != api.EventResync {
				t.Fatalf("reader %d's watch event %+v", i, ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("reader %d got no watch event after its proxy was killed", i)
		}
		n, err := r.Get(ctx, path)
		must(t, err)
		if string(n.Value) != "v2" {
			t.Fatalf("reader %d read %q after the write: a stale cached value", i, n.Value)
		}
	}
}

// TestProxyClientWritesWhatItCaches: a client behind a proxy that caches
// a value and then writes it reads its own write back, every round.
func TestProxyClientWritesWhatItCaches(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	startProxies(t, c, 1)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	const path = "/demo/config/own-writes"
	w := proxyCachingClient(t, c)
	_, err := w.Put(ctx, path, []byte("v0"), sdk.MakeParents())
	must(t, err)
	warmCache(ctx, t, w, path, "v0")
	for round := 1; round <= 20; round++ {
		want := fmt.Sprintf("v%d", round)
		began := time.Now()
		_, err := w.Put(ctx, path, []byte(want))
		must(t, err)
		took := time.Since(began)
		t.Logf("round %d: write took %v", round, took)
		for r := 0; r < 3; r++ {
			n, err := w.Get(ctx, path)
			must(t, err)
			if string(n.Value) != want {
				t.Fatalf("round %d: read %q after writing %q (the write took %v): a stale cached value", round, n.Value, want, took)
			}
		}
	}
	t.Logf("%+v", w.CacheStats())
}
