package sdk

// The client cache: values this client read on its session, served with
// no RPC until the leader invalidates them. The leader records the session
// as a cacher before the read and, before any change of the node commits,
// sends an invalidation on the session's KeepAlive and waits for its
// acknowledgement (or for the lease to run out). The cache serves only
// while the lease is confirmed within the cache window (so never in
// jeopardy), and is flushed on a fail-over (the new leader knows no
// cachers, and an invalidation may have been lost) and on a resync.

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockservice/lockd/api"
)

// maxCacheEntries bounds a session's cache; past it, reads are not cached
// until an invalidation or a flush makes room.
const maxCacheEntries = 100_000

// cacheState is a session's cache, guarded by the session's mutex.
type cacheState struct {
	entries map[string]api.GetResponse
	// gen rises with every invalidation and flush: a read that started
	// under another gen may have raced with one, and is not stored.
	gen uint64
}

func (cs *cacheState) flush() {
	cs.gen++
	clear(cs.entries)
}

func (cs *cacheState) invalidate(path string) {
	cs.gen++
	delete(cs.entries, path)
}

// cacheUntil is when the cache stops serving (a pure decision on the lease
// clock): the cache window after the last confirmed KeepAlive's send, less
// the drift margin, and not at all in jeopardy.
func (lc leaseClock) cacheUntil() time.Time {
	if !lc.jeopardySince.IsZero() || lc.lastConfirmedSend.IsZero() {
		return time.Time{}
	}
	w := api.CacheWindowFor(lc.lease)
	return lc.lastConfirmedSend.Add(w - DriftMargin(w))
}

// cacheUntilLocked is when the session's cache stops serving: direct, the
// lease clock's cache window; through a proxy, the grant the proxy gave
// with its last reply (counted from the send, and never past the proxy's
// own window on the cell, which is what invalidates the values it made
// cacheable), and never in jeopardy.
func (s *Session) cacheUntilLocked() time.Time {
	lc := s.clockLocked()
	if s.proxy == "" {
		return lc.cacheUntil()
	}
	if !lc.jeopardySince.IsZero() || lc.lastConfirmedSend.IsZero() {
		return time.Time{}
	}
	return s.proxyCacheUntil
}

// cached returns path's cached read, if the cache may serve it now.
func (s *Session) cached(path string) (api.GetResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || !time.Now().Before(s.cacheUntilLocked()) {
		return api.GetResponse{}, false
	}
	r, ok := s.cache.entries[path]
	return r, ok
}

// cacheWindow is how long after the send of its last confirmed KeepAlive
// the session serves cached values (less the drift margin): the window
// its cacheable reads declare (api.ReadRequest.CacheWindowMS).
func (s *Session) cacheWindow() time.Duration { return api.CacheWindowFor(s.lease) }

// renewWait is the next KeepAlive's long poll: while the leader may count
// the session as a cacher (its cache holds a value, or a cacheable read
// went out within the last lease-long poll, whose reply may not have been
// stored), a third of the cache window (api.CacheKeepAliveWait), so the
// short grant is renewed, and an invalidation answered, well before its
// deadline; else the lease's.
func (s *Session) renewWait() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cachingLocked() {
		return s.wait
	}
	return min(s.wait, api.CacheKeepAliveWait(s.lease))
}

// cachingLocked reports whether the leader may count the session a
// cacher: its cache holds a value, or a cacheable read went out within
// the last lease-long poll.
func (s *Session) cachingLocked() bool {
	return len(s.cache.entries) > 0 || (!s.cacheReadAt.IsZero() && time.Since(s.cacheReadAt) <= s.wait)
}

// beginCacheRead is called as a cacheable read goes out: it returns the
// generation the reply must find unchanged to be stored, and switches the
// KeepAlives to the cache's short poll at once (the leader counts the
// session a cacher from this read on, stored or not), ending a
// lease-long poll the cell may hold (ackLoop).
func (s *Session) beginCacheRead() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	short := s.cachingLocked()
	s.cacheReadAt = time.Now()
	if !short && api.CacheKeepAliveWait(s.lease) < s.wait {
		s.renewSoon = true
		select {
		case s.ackKick <- struct{}{}:
		default:
		}
	}
	return s.cache.gen
}

// takeRenewSoon reports (and clears) that a cacheable read went out while
// a lease-long poll may be out (beginCacheRead): ackLoop then sends a KeepAlive at
// once, which ends that poll and confirms the window.
func (s *Session) takeRenewSoon() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.renewSoon
	s.renewSoon = false
	return v
}

// cacheGen is the generation a read about to be sent must find unchanged
// when its reply arrives, for the reply to be cached.
func (s *Session) cacheGen() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cache.gen
}

// store caches a reply the leader made cacheable, unless an invalidation
// or flush came between the read's send and now, or the reply is from
// another leadership than the one the session knows, or was made
// cacheable by another proxy than the one its KeepAlives go through (only
// that one invalidates it).
func (s *Session) store(path string, r api.GetResponse, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.cache.gen != gen || r.Epoch != s.epoch || r.Proxy != s.proxy || len(s.cache.entries) >= maxCacheEntries {
		return
	}
	s.cache.entries[path] = r
}

// CacheStats are a client's cache figures since it was created.
type CacheStats struct {
	Hits, Misses uint64
	// SharedHits are the misses a lockproxy answered from its shared
	// cache, with no read at the cell.
	SharedHits uint64
}

// HitRate is Hits / (Hits + Misses), 0 with no reads.
func (s CacheStats) HitRate() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

type cacheCounters struct{ hits, misses, shared atomic.Uint64 }

// CacheStats reports the client's cache hits (reads served with no RPC)
// and misses (reads sent to the cell).
func (c *Client) CacheStats() CacheStats {
	return CacheStats{Hits: c.cacheCount.hits.Load(), Misses: c.cacheCount.misses.Load(), SharedHits: c.cacheCount.shared.Load()}
}

// KeepAlivesSent reports how many KeepAlive requests the client's sessions
// sent (every attempt, to a cell or a proxy).
func (c *Client) KeepAlivesSent() uint64 { return c.keepAlivesSent.Load() }

// Collectors are Prometheus collectors of the client's figures, for the
// application to register on its /metrics: lockd_sdk_cache_hits_total
// (reads served from the cache, no RPC), lockd_sdk_cache_misses_total
// (reads sent to the cell or a proxy) and lockd_sdk_keepalives_total
// (KeepAlive requests sent); and each session's lease telemetry
// (lockd_sdk_session_*, labelled by cell and session up to
// MaxLabelledSessions: see SessionStats).
func (c *Client) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockd_sdk_cache_hits_total",
			Help: "Reads the client served from its cache, with no RPC."},
			func() float64 { return float64(c.cacheCount.hits.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockd_sdk_cache_misses_total",
			Help: "Reads the client sent to the cell (or a proxy)."},
			func() float64 { return float64(c.cacheCount.misses.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockd_sdk_keepalives_total",
			Help: "KeepAlive requests the client's sessions sent (every attempt)."},
			func() float64 { return float64(c.keepAlivesSent.Load()) }),
		sessionCollector{c}, // per-session lease telemetry (telemetry_metrics.go)
	}
}
