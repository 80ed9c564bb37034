package integration_test

// Attack round 3 on issue 23: cache grants are committed entries, so
// they must be metered like writes.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

const grantFloodAdminToken = "admin-token-of-grantflood"

// TestCacheGrantsAreMeteredWrites: every cache grant is a Raft entry
// (cache_session with the node). Concurrent grants of one node to one
// session share one entry, and a grant spends a write of the reader's
// tenant's writes per second (past it the read is served uncached), so a
// tenant held to 2 writes/s cannot make the cell commit hundreds of
// entries with bursts of reads. The attack review's repro: 901 entries
// from 3 writes and 3 bursts of 300 reads. mutant lockd_broken_freegrants
// (grants not metered) fails it.
func TestCacheGrantsAreMeteredWrites(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{AdminToken: grantFloodAdminToken})
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	adm, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: grantFloodAdminToken, Direct: true})
	must(t, err)
	defer adm.Close()
	var resp api.TenantResponse
	for attempt := 0; ; attempt++ {
		resp, err = adm.PutTenant(ctx, api.Tenant{Name: "h", Grants: []api.Grant{{Prefix: "/demo/h", Roles: []api.Role{api.RoleWrite}}},
			Quota: api.Quota{WritesPerSec: 2}}, true)
		if api.CodeOf(err) != api.CodeUnavailable || attempt == 100 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	must(t, err)
	admin := cluster.NewClient(c.Endpoints()...)
	admin.Token = grantFloodAdminToken
	h := cluster.NewClient(c.Endpoints()...)
	h.Token = resp.Token
	mustDo(t, admin, api.RoutePut, api.PutRequest{Path: "/demo/h/x", Value: []byte("v0"), MakeParents: true}, nil)
	probe := func() uint64 {
		var r api.CreateResponse
		mustDo(t, admin, api.RoutePut, api.PutRequest{Path: "/demo/probe", Value: []byte("p")}, &r)
		return r.Node.ModifyIndex
	}
	// Nodes the tenant may read (made by the admin: its own writes are
	// paced), and sessions of the tenant.
	const nodes, sessions = 12, 12
	for i := 0; i < nodes; i++ {
		mustDo(t, admin, api.RoutePut, api.PutRequest{Path: fmt.Sprintf("/demo/h/n%02d", i), Value: []byte("v")}, nil)
	}
	sess := make([]api.SessionResponse, sessions)
	for i := range sess {
		mustDo(t, h, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo"}, &sess[i])
		ka := api.KeepAliveRequest{Cell: "demo", Session: sess[i].Session, Secret: sess[i].Secret}
		mustDo(t, h, api.RouteSessionKeepAlive, ka, nil)
	}
	// Every session reads every node, cacheable, each read 5 times at once.
	burst := func(cache bool) (cacheable int64, d time.Duration) {
		var wg sync.WaitGroup
		var ok atomic.Int64
		start := time.Now()
		for _, se := range sess {
			for i := 0; i < nodes; i++ {
				for k := 0; k < 5; k++ {
					wg.Add(1)
					go func(se api.SessionResponse, path string) {
						defer wg.Done()
						var got api.GetResponse
						if err := do(h, api.RouteGet, api.ReadRequest{Path: path, Session: se.Session, Secret: se.Secret, Cache: cache, CacheWindowMS: cacheWindowMS(cache)}, &got); err == nil && got.Cacheable {
							ok.Add(1)
						}
					}(se, fmt.Sprintf("/demo/h/n%02d", i))
				}
			}
		}
		wg.Wait()
		return ok.Load(), time.Since(start)
	}
	// The cell's own entries (ticks, confirms) meanwhile: the same burst
	// uncached.
	a := probe()
	_, d0 := burst(false)
	b := probe()
	background := float64(b-a-1) / d0.Seconds()
	a = probe()
	okc, d := burst(true)
	b = probe()
	entries := b - a - 1
	t.Logf("%d sessions x %d nodes x 5 concurrent cacheable reads (%v, %d answered cacheable): %d log entries between the probes (uncached: %d in %v)",
		sessions, nodes, d.Round(time.Millisecond), okc, entries, uint64(background*d0.Seconds()), d0.Round(time.Millisecond))
	// The quota allows 2 grants a second on each lockd the reads reach
	// (writes are metered per lockd), plus each bucket's second.
	n := float64(len(c.Endpoints()))
	if bound := uint64((background+2*n)*d.Seconds()+2*n) + 4; entries > bound {
		t.Errorf("amplification: a tenant held to 2 writes/s per lockd made the cell commit %d entries (at most %d) with reads alone", entries, bound)
	}
}

// cacheWindowMS is the window a caching read declares (a read that
// declares none is served uncached, and grants nothing to meter).
func cacheWindowMS(cache bool) int64 {
	if !cache {
		return 0
	}
	return api.CacheWindow.Milliseconds()
}
