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
		{"short lease: 3/4 of it", leaseClock{lastConfirmedSend: sent, lease: 4 * time.Second}, sent.Add(3*time.Second - DriftMargin(3*time.Second))},
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
