package sdk

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockservice/lockd/api"
)

// The cache serves only within the window after the last confirmed
// KeepAlive's send, never in jeopardy (pure: no clock read).
func TestCacheUntil(t *testing.T) {
	sent := time.Unix(1000, 0)
	w := api.CacheWindowFor(12 * time.Second)
	for _, tc := range []struct {
		name string
		lc   leaseClock
		want time.Time
	}{
		{"confirmed", leaseClock{lastConfirmedSend: sent, lease: 12 * time.Second}, sent.Add(w - DriftMargin(w))},
		{"short lease: 3/4 of it", leaseClock{lastConfirmedSend: sent, lease: time.Second}, sent.Add(750*time.Millisecond - DriftMargin(750*time.Millisecond))},
		{"in jeopardy", leaseClock{lastConfirmedSend: sent, lease: 12 * time.Second, jeopardySince: sent.Add(12 * time.Second)}, time.Time{}},
		{"never confirmed", leaseClock{lease: 12 * time.Second}, time.Time{}},
	} {
		if got := tc.lc.cacheUntil(); !got.Equal(tc.want) {
			t.Errorf("%s: cacheUntil %v, want %v", tc.name, got, tc.want)
		}
	}
	if w >= 12*time.Second-DriftMargin(12*time.Second) {
		t.Fatalf("the cache window %v must end before the lease does", w)
	}
}

// A reply is cached only if no invalidation or flush came while it was in
// flight, and only under the leadership the session knows.
func TestStoreRefusesRacedReplies(t *testing.T) {
	s := &Session{epoch: 5, lease: 12 * time.Second, lastConfirmedSend: time.Now()}
	s.cache.entries = map[string]api.GetResponse{}
	r := api.GetResponse{Exists: true, Node: api.Node{Path: "/demo/x", Value: []byte("v1")}, Cacheable: true, Epoch: 5}

	gen := s.cacheGen()
	s.cache.invalidate("/demo/x") // arrived while the read was in flight
	s.store("/demo/x", r, gen)
	if _, ok := s.cached("/demo/x"); ok {
		t.Fatal("a reply that raced with an invalidation was cached")
	}
	gen = s.cacheGen()
	s.store("/demo/x", api.GetResponse{Exists: true, Cacheable: true, Epoch: 6}, gen)
	if _, ok := s.cached("/demo/x"); ok {
		t.Fatal("a reply from a leadership the session has not seen was cached")
	}
	s.store("/demo/x", r, gen)
	if got, ok := s.cached("/demo/x"); !ok || string(got.Node.Value) != "v1" {
		t.Fatalf("cached %+v %v", got, ok)
	}
	s.cache.flush()
	if _, ok := s.cached("/demo/x"); ok {
		t.Fatal("served after a flush")
	}
}

// TestCollectorsExportTheCacheFigures: the collectors an application
// registers report the client's hits and misses.
func TestCollectorsExportTheCacheFigures(t *testing.T) {
	c := &Client{}
	c.cacheCount.hits.Add(3)
	c.cacheCount.misses.Add(1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf.GetMetric()[0].GetCounter().GetValue()
	}
	if got["lockd_sdk_cache_hits_total"] != 3 || got["lockd_sdk_cache_misses_total"] != 1 {
		t.Fatalf("gathered %v", got)
	}
}

// A session renews on the lease's long poll until it sends a cacheable
// read; from then on (stored or not: the leader counts it a cacher) and
// while its cache holds a value, on a third of the cache window. Its first
// cacheable read asks ackLoop for a KeepAlive at once (the poll out may be
// lease-long), and declares its window.
func TestCacheRenewsTheShortGrant(t *testing.T) {
	lease := 12 * time.Second
	s := &Session{epoch: 5, lease: lease, wait: lease / 3, lastConfirmedSend: time.Now(), ackKick: make(chan struct{}, 1)}
	s.cache.entries = map[string]api.GetResponse{}
	if got := s.renewWait(); got != lease/3 {
		t.Fatalf("no cacheable read yet: wait %v, want %v", got, lease/3)
	}
	if got, want := s.cacheWindow(), api.CacheWindowFor(lease); got != want {
		t.Fatalf("declared window %v, want %v", got, want)
	}
	gen := s.beginCacheRead()
	select {
	case <-s.ackKick:
	default:
		t.Fatal("the first cacheable read sent no KeepAlive kick")
	}
	if !s.takeRenewSoon() || s.takeRenewSoon() {
		t.Fatal("renewSoon not set once by the first cacheable read")
	}
	if got, want := s.renewWait(), api.CacheKeepAliveWait(lease); got != want {
		t.Fatalf("a cacheable read out, nothing stored: wait %v, want %v", got, want)
	}
	if want := api.CacheWindowFor(lease) - DriftMargin(api.CacheWindowFor(lease)); 2*s.renewWait() >= want {
		t.Fatalf("two waits %v do not fit in the window %v: the cache would lapse between replies", 2*s.renewWait(), want)
	}
	s.store("/demo/x", api.GetResponse{Exists: true, Cacheable: true, Epoch: 5}, gen)
	s.beginCacheRead()
	if s.takeRenewSoon() {
		t.Fatal("a read on the short poll asked for another KeepAlive")
	}
	s.cacheReadAt = time.Now().Add(-lease)
	if got, want := s.renewWait(), api.CacheKeepAliveWait(lease); got != want {
		t.Fatalf("caching: wait %v, want %v", got, want)
	}
	s.cache.flush()
	if got := s.renewWait(); got != lease/3 {
		t.Fatalf("flushed cache, last cacheable read a lease ago: wait %v, want %v", got, lease/3)
	}
}

// Through a proxy the cache serves within the proxy's grant (which the
// proxy bounds by its own window on the cell), not the lease clock's
// window from a batch's confirmation; never in jeopardy.
func TestProxiedCacheServesTheProxyGrant(t *testing.T) {
	now := time.Now()
	lease := 12 * time.Second
	for _, tc := range []struct {
		name      string
		confirmed time.Time
		grant     time.Time
		jeopardy  bool
		serves    bool
	}{
		{"within the grant, batch confirmed long ago", now.Add(-5 * time.Second), now.Add(time.Second), false, true},
		{"grant over", now, now.Add(-time.Millisecond), false, false},
		{"in jeopardy", now, now.Add(time.Second), true, false},
	} {
		s := &Session{epoch: 5, lease: lease, wait: lease / 3, lastConfirmedSend: tc.confirmed, proxy: "p1", proxyCacheUntil: tc.grant, ackKick: make(chan struct{}, 1)}
		if tc.jeopardy {
			s.jeopardySince = now
		}
		s.cache.entries = map[string]api.GetResponse{"/demo/x": {Exists: true, Cacheable: true, Epoch: 5, Proxy: "p1"}}
		if _, ok := s.cached("/demo/x"); ok != tc.serves {
			t.Errorf("%s: served %v, want %v", tc.name, ok, tc.serves)
		}
	}
}

// A cacheable reply the session does not store (an invalidation of
// another path, or a new leader's epoch, came while it was out) still
// leaves the leader counting it a cacher: it keeps the cache's short poll
// for a lease-long poll after the read, so an invalidation of that path is
// answered well within its deadline (the attack on short grants found it
// long-polling 4 s against a 1.5 s deadline, then revoked).
func TestUnstoredGrantKeepsTheShortPoll(t *testing.T) {
	lease := 12 * time.Second
	for _, tc := range []struct {
		name   string
		during func(s *Session) // while the read is out
		epoch  uint64           // of the cacheable reply
	}{
		{"another path invalidated meanwhile", func(s *Session) { s.mu.Lock(); s.cache.invalidate("/demo/other"); s.mu.Unlock() }, 5},
		{"reply under a new leader not yet seen", func(*Session) {}, 6},
	} {
		s := &Session{epoch: 5, lease: lease, wait: lease / 3, lastConfirmedSend: time.Now(), ackKick: make(chan struct{}, 1)}
		s.cache.entries = map[string]api.GetResponse{}
		gen := s.beginCacheRead()
		tc.during(s)
		s.store("/demo/x", api.GetResponse{Exists: true, Cacheable: true, Epoch: tc.epoch}, gen)
		if len(s.cache.entries) != 0 {
			t.Fatalf("%s: the reply was stored", tc.name)
		}
		if got, want := s.renewWait(), api.CacheKeepAliveWait(lease); got != want {
			t.Errorf("%s: a session the leader holds as a cacher polls %v, want %v", tc.name, got, want)
		}
	}
}
