package proxy

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestGrantLapsesCountClientsFairly: a tenant's count of clients that let
// a cache grant run out with an invalidation unacknowledged (at
// api.MaxCacheMissesPerTenant its clients are served uncached) counts a
// client session once, however many of its paths one invalidation (or a
// fail-over's of all) named, and only when the invalidation left its
// grant api.FairCacheAck or more: a client whose invalidation came a
// moment before its grant's end had no time to answer. The leader judges
// its sessions so (session.FairAckTime); a proxy that counted waits, or
// every grant still live, turned an honest tenant's caching off for good
// after three unlucky invalidations (CI run of 2026-12-07,
// TestHostileCacherCannotBlockWrites through a proxy).
func TestGrantLapsesCountClientsFairly(t *testing.T) {
	window := api.CacheWindowFor(12 * time.Second)
	fair := api.FairCacheAck(window)
	type client struct {
		left  time.Duration // of its grant when the invalidation is queued
		paths int           // it was served as cacheable
		acks  bool          // it acknowledges at once
	}
	for _, c := range []struct {
		name    string
		clients []client
		all     bool // a fail-over: every path is invalidated
		lapses  int  // the tenant's count
		held    float64
		unheld  float64
		refused bool
	}{
		{name: "one path, fair", clients: []client{{left: window, paths: 1}}, lapses: 1, held: 1},
		{name: "three paths at once count one client", clients: []client{{left: window, paths: 3}}, lapses: 1, held: 1, unheld: 2},
		{name: "a fail-over's invalidation of all counts one client", clients: []client{{left: window, paths: 5}}, all: true, lapses: 1, held: 1, unheld: 4},
		{name: "exactly the fair time left", clients: []client{{left: fair, paths: 1}}, lapses: 1, held: 1},
		{name: "a grant a moment from its end", clients: []client{{left: fair - time.Millisecond, paths: 1}}, unheld: 1},
		{name: "a grant already over", clients: []client{{left: -time.Second, paths: 1}}, unheld: 1},
		{name: "an acknowledging client", clients: []client{{left: window, paths: 2, acks: true}}},
		{name: "three clients, three lapses: the tenant is refused",
			clients: []client{{left: window, paths: 2}, {left: window, paths: 1}, {left: window, paths: 1}}, lapses: 3, held: 3, unheld: 1, refused: true},
		{name: "three clients, one unlucky: not refused",
			clients: []client{{left: window, paths: 1}, {left: 10 * time.Millisecond, paths: 1}, {left: window, paths: 1}}, lapses: 2, held: 2, unheld: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tb := testTable()
				now := time.Now()
				var sessions []*proxySession
				tb.mu.Lock()
				for i, cl := range c.clients {
					ps := newProxySession(uint64(i + 1))
					ps.lease, ps.tenant, ps.grantUntil = 12*time.Second, "t1", now.Add(cl.left)
					for j := 0; j < cl.paths; j++ {
						path := fmt.Sprintf("/demo/c%d/p%d", i, j)
						if tb.cachers[path] == nil {
							tb.cachers[path] = map[uint64]struct{}{}
						}
						tb.cachers[path][ps.id] = struct{}{}
						ps.cached[path] = struct{}{}
					}
					tb.sessions[ps.id] = ps
					sessions = append(sessions, ps)
				}
				var paths []string
				if !c.all {
					for path := range tb.cachers {
						paths = append(paths, path)
					}
				}
				tb.mu.Unlock()
				done := tb.invalidate(paths, false)
				tb.mu.Lock()
				for i, cl := range c.clients {
					if cl.acks {
						tb.proxyAckLocked(sessions[i], sessions[i].pseq)
					}
				}
				tb.mu.Unlock()
				time.Sleep(2 * window) // every grant is over
				synctest.Wait()
				select {
				case <-done:
				default:
					t.Fatal("the wait did not end with the grants")
				}
				tb.mu.Lock()
				defer tb.mu.Unlock()
				if got := tb.lapses["t1"]; got != c.lapses {
					t.Errorf("tenant's count %d, want %d", got, c.lapses)
				}
				if got := tb.tenantLapsedLocked("t1"); got != c.refused {
					t.Errorf("tenant refused %v, want %v", got, c.refused)
				}
				held := testutil.ToFloat64(tb.m.grantLapses.WithLabelValues("true"))
				unheld := testutil.ToFloat64(tb.m.grantLapses.WithLabelValues("false"))
				if held != c.held || unheld != c.unheld {
					t.Errorf("lapses held %v, not held %v; want %v, %v", held, unheld, c.held, c.unheld)
				}
			})
		})
	}
}
