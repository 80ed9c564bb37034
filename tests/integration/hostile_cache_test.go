package integration_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

const cacheAttackAdminToken = "admin-token-of-the-hostile-cache-test"

// hostileCacheTenants are the writer (write and lock on /demo/x), the
// reader (read only: the hostile cacher) and the honest reader, with
// their tokens. The honest client is a tenant of its own: the hostile
// tenant's count of lapsed grants is the attack's, and a late
// acknowledgement of the honest client's on a loaded machine must not
// add to it.
func hostileCacheTenants(ctx context.Context, t *testing.T, adm *sdk.Client) (writer, reader, honest string) {
	t.Helper()
	tokens := map[string]string{}
	for _, tn := range []api.Tenant{
		{Name: "writer", Grants: []api.Grant{{Prefix: "/demo/x", Roles: []api.Role{api.RoleWrite, api.RoleLock}}}},
		{Name: "reader", Grants: []api.Grant{{Prefix: "/demo/x", Roles: []api.Role{api.RoleRead}}}},
		{Name: "honest", Grants: []api.Grant{{Prefix: "/demo/x", Roles: []api.Role{api.RoleRead}}}},
	} {
		var resp api.TenantResponse
		var err error
		for attempt := 0; ; attempt++ { // the directory bootstraps just after the cells lead
			resp, err = adm.PutTenant(ctx, tn, true)
			if api.CodeOf(err) != api.CodeUnavailable || attempt == 100 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		must(t, err)
		tokens[tn.Name] = resp.Token
	}
	return tokens["writer"], tokens["reader"], tokens["honest"]
}

// hostileCacher is a read-only tenant's session that caches nodes and
// then keeps its lease alive with KeepAlives that never acknowledge.
type hostileCacher struct {
	cl     *cluster.Client
	sess   api.SessionResponse
	cancel context.CancelFunc
	done   chan struct{}
}

// startHostileCacher opens the session, does a cached get of each path
// (a missing one answers no_node), and starts its KeepAlives. cached
// reports whether the first path's read was made cacheable.
func startHostileCacher(t *testing.T, cl *cluster.Client, paths []string) (h *hostileCacher, cached bool, servedBy string) {
	t.Helper()
	h = &hostileCacher{cl: cl, done: make(chan struct{})}
	mustDo(t, cl, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo"}, &h.sess)
	// Two KeepAlives first: a lockproxy serves its cache to the clients
	// whose KeepAlives name it (its instance, in the first reply).
	ka := api.KeepAliveRequest{Cell: "demo", Session: h.sess.Session, Secret: h.sess.Secret}
	var first api.SessionResponse
	mustDo(t, cl, api.RouteSessionKeepAlive, ka, &first)
	ka.Proxy = first.Proxy
	mustDo(t, cl, api.RouteSessionKeepAlive, ka, nil)
	// It renews its lease from here on, before its first cached read: a
	// deadline counts against a session only if it left the client half
	// its cache window (session.FairAckTime), and a lease last renewed
	// before a read that waited out a new leader's fence would make the
	// first invalidation's deadline unfair, and the round no miss.
	h.renew(ka)
	for i, p := range paths {
		// The first path is read until it is made cacheable (a proxy's
		// own session may be a moment from its first confirmed window),
		// a bounded number of times.
		for attempt := 0; ; attempt++ {
			var got api.GetResponse
			err := do(cl, api.RouteGet, api.ReadRequest{Path: p, Session: h.sess.Session, Secret: h.sess.Secret, Cache: true, CacheWindowMS: api.CacheWindow.Milliseconds()}, &got)
			if err != nil && api.CodeOf(err) != api.CodeNoNode {
				h.stop()
				t.Fatalf("cached get of %s: %v", p, err)
			}
			if i > 0 {
				break
			}
			cached, servedBy = got.Cacheable, got.Proxy
			if cached || attempt == 20 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return h, cached, servedBy
}

// renew keeps the hostile session's lease renewed, never acknowledging
// an event, until stop.
func (h *hostileCacher) renew(ka api.KeepAliveRequest) {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		// Ack fields stay empty: no event is ever acknowledged.
		req := ka
		req.WaitMS = 300
		for i := 0; i < 100_000 && ctx.Err() == nil; i++ {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			_ = h.cl.Do(cctx, api.RouteSessionKeepAlive, req, nil)
			ccancel()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

// recache does another cached get of path on the hostile session and
// reports whether the leader made it cacheable.
func (h *hostileCacher) recache(t *testing.T, path string) bool {
	t.Helper()
	var got api.GetResponse
	mustDo(t, h.cl, api.RouteGet, api.ReadRequest{Path: path, Session: h.sess.Session, Secret: h.sess.Secret, Cache: true, CacheWindowMS: api.CacheWindow.Milliseconds()}, &got)
	return got.Cacheable
}

func (h *hostileCacher) stop() {
	h.cancel()
	<-h.done
}

// maxPutAttempts bounds a raw Put's attempts (not_leader redirects
// included): a write waits for a cacher at most one cache window (9 s),
// so one attempt, or two if the server's 5 s request timeout ends the
// first, must go through.
const maxPutAttempts = 6

// rawPut writes value with single attempts (cl makes one: MaxAttempts 1;
// a 503 is retried here, and counted), and returns the time from the
// first attempt to the success.
func rawPut(t *testing.T, cl *cluster.Client, path, value string) (took time.Duration, unavailable int) {
	t.Helper()
	began := time.Now()
	for attempt := 0; attempt < maxPutAttempts; attempt++ {
		ctx, cancel := ctxFor(15 * time.Second)
		err := cl.Do(ctx, api.RoutePut, api.PutRequest{Path: path, Value: []byte(value)}, nil)
		cancel()
		switch {
		case err == nil:
			return time.Since(began), unavailable
		case api.CodeOf(err) == api.CodeNotLeader:
			time.Sleep(50 * time.Millisecond) // the client follows the hint on the next attempt
		case api.CodeOf(err) == api.CodeUnavailable || errors.Is(err, context.DeadlineExceeded):
			unavailable++
		default:
			t.Fatalf("put %s: %v", path, err)
		}
	}
	t.Fatalf("put %s: %d attempts in %v, %d answered unavailable: a cacher that renews its lease but never acknowledges blocks the write",
		path, maxPutAttempts, time.Since(began).Round(time.Millisecond), unavailable)
	return 0, 0
}

// lockUnlock takes and releases the mutex, returning the Unlock's time.
func lockUnlock(t *testing.T, m *sdk.Mutex) time.Duration {
	t.Helper()
	ctx, cancel := ctxFor(40 * time.Second)
	defer cancel()
	must(t, m.Lock(ctx))
	began := time.Now()
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("unlock while a hostile cacher holds the lock node: %v", err)
	}
	return time.Since(began)
}

// honestRead is an honest caching client's read of path after a write of
// want returned: never the old value.
func honestRead(t *testing.T, cl *sdk.Client, path, want string) {
	t.Helper()
	ctx, cancel := ctxFor(20 * time.Second)
	defer cancel()
	n, err := cl.Get(ctx, path)
	must(t, err)
	if string(n.Value) != want {
		t.Fatalf("an honest caching client read %q after the write of %q returned: stale", n.Value, want)
	}
}

func latencyLine(name string, d []time.Duration) string {
	if len(d) == 0 {
		return name + ": no samples"
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("%s: n=%d p50=%v p99=%v max=%v", name, len(s), at(0.5).Round(time.Millisecond), at(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// TestHostileCacherCannotBlockWrites is issue 22's hole 5 on real
// processes, tokens required: a read-only tenant caches a node (and the
// lock nodes a lock will create) and keeps its session alive with
// KeepAlives that never acknowledge. A writer's Put of the node must
// still complete, each within one cache window (at most one 503 on the
// way), and an Unlock must not wait at all; the hostile session is then
// refused as a cacher. An honest caching client never reads a stale
// value once a write returned. Put and Unlock latencies are logged alone
// and during the attack, with everyone talking to the lockds directly,
// and with everyone (attacker, writer, honest reader) going through a
// lockproxy. mutant lockd_broken_cachewindow (deadlines ignored) makes
// every Put fail.
func TestHostileCacherCannotBlockWrites(t *testing.T) {
	t.Parallel()
	for _, viaProxy := range []bool{false, true} {
		name := map[bool]string{false: "direct", true: "through a proxy"}[viaProxy]
		t.Run(name, func(t *testing.T) { cacheAttack(t, viaProxy) })
	}
}

func cacheAttack(t *testing.T, viaProxy bool) {
	// The API's default lease (12 s): its cache window (9 s) is longer
	// than the server's request timeout (5 s), as in production.
	c := cluster.Start(t, cluster.Options{Replicas: 3, AdminToken: cacheAttackAdminToken, Lease: api.DefaultLease})
	ctx, cancel := ctxFor(5 * time.Minute)
	defer cancel()
	adm, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: cacheAttackAdminToken, Direct: true})
	must(t, err)
	defer adm.Close()
	wtok, rtok, htok := hostileCacheTenants(ctx, t, adm)
	const cfg, lk = "/demo/x/cfg", "/demo/x/lk"
	admin := authClient(c, cacheAttackAdminToken)
	for _, p := range []string{cfg, lk} {
		mustDo(t, admin, api.RoutePut, api.PutRequest{Path: p, Value: []byte("v0"), MakeParents: true}, nil)
	}
	raw := func(tok string) *cluster.Client { return authClient(c, tok) }
	// charged is how many of the hostile tenant's sessions were held to
	// a missed invalidation: refused as cachers by the cell's leader
	// since it leads (direct: a new leader forgets the tenant's misses,
	// by design, api.MaxCacheMissesPerTenant; CI saw demo's leader
	// change mid-attack, 2026-12-07, and the check after the rounds
	// failed), or counted by the proxy as clients that let a fair grant
	// run out.
	leader, base := 0, 0
	charged := func() int {
		id, err := c.LeaderOf("demo")
		must(t, err)
		n := revokedOn(t, c, id)
		if id != leader {
			if leader != 0 {
				t.Logf("demo's leader changed (replica %d → %d): the tenant's misses count again from 0", leader, id)
			}
			leader, base = id, n
		}
		return n - base
	}
	if viaProxy {
		p, err := c.StartProxy("cache-attack-proxy")
		must(t, err)
		raw = func(tok string) *cluster.Client {
			cl := cluster.NewClient(p.Addr)
			cl.Token = tok
			return cl
		}
		charged = func() int { return proxyHeldLapses(t, c, p.Addr) }
	}
	writer, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: wtok, Direct: !viaProxy, RequestTimeout: 10 * time.Second})
	must(t, err)
	defer writer.Close()
	honest, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: htok, Direct: !viaProxy})
	must(t, err)
	defer honest.Close()
	_, err = honest.Session(ctx, "demo")
	must(t, err)
	wraw := raw(wtok)
	wraw.MaxAttempts = 1 // rawPut retries, and counts the 503s
	mutex := writer.NewMutex(lk)

	var put, unlock, putAttack, unlockAttack []time.Duration
	version := 0
	write := func(into *[]time.Duration) int {
		honestRead(t, honest, cfg, fmt.Sprintf("v%d", version)) // cached from here on
		version++
		took, n503 := rawPut(t, wraw, cfg, fmt.Sprintf("v%d", version))
		*into = append(*into, took)
		honestRead(t, honest, cfg, fmt.Sprintf("v%d", version))
		return n503
	}
	for i := 0; i < 8; i++ {
		write(&put)
		unlock = append(unlock, lockUnlock(t, mutex))
	}
	hostileAttackRounds(t, viaProxy, func() *cluster.Client { return raw(rtok) }, charged, cfg, lk, write, func() { unlockAttack = append(unlockAttack, lockUnlock(t, mutex)) }, &putAttack)
	t.Log(latencyLine("put alone", put))
	t.Log(latencyLine("put during the attack", putAttack))
	t.Log(latencyLine("unlock alone", unlock))
	t.Log(latencyLine("unlock during the attack", unlockAttack))
	t.Logf("honest client cache: %+v", honest.CacheStats())
	counters, revoked := cacheRevocations(t, c)
	t.Logf("cache deadline counters: %s", counters)
	if viaProxy && revoked > 0 {
		// The proxy's own session is the leader's only cacher here: it
		// must acknowledge in time even for a client that never does, or
		// one hostile client turns the shared cache off for everyone.
		t.Fatalf("the proxy's session missed %d invalidation deadlines and lost its caching", revoked)
	}
}

// cacheRevocations reads the cache-deadline counters from every lockd's
// /metrics, and the sessions refused as cachers in all.
func cacheRevocations(t *testing.T, c *cluster.Cluster) (string, int) {
	var b strings.Builder
	revoked := 0
	for _, ep := range c.Endpoints() {
		ctx, cancel := ctxFor(10 * time.Second)
		_, body, err := authClient(c, cacheAttackAdminToken).Once(ctx, ep, http.MethodGet, api.RouteMetrics, nil, 0)
		cancel()
		must(t, err)
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "lockd_cache_cachers_revoked_total") || strings.HasPrefix(line, "lockd_cache_invalidation_deadlines_missed_total") {
				if !strings.HasSuffix(line, " 0") {
					fmt.Fprintf(&b, "%s %s; ", ep, line)
				}
				var n int
				if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%d", &n); err == nil && strings.HasPrefix(line, "lockd_cache_cachers_revoked_total") {
					revoked += n
				}
			}
		}
	}
	return b.String(), revoked
}

// revokedOn is replica id's count of demo's sessions refused as cachers
// (lockd_cache_cachers_revoked_total{cell="demo"}).
func revokedOn(t *testing.T, c *cluster.Cluster, id int) int {
	t.Helper()
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	_, body, err := authClient(c, cacheAttackAdminToken).Once(ctx, c.Endpoints()[id-1], http.MethodGet, api.RouteMetrics, nil, 0)
	must(t, err)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "lockd_cache_cachers_revoked_total{") && strings.Contains(line, `cell="demo"`) {
			var n float64
			if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &n); err != nil {
				t.Fatalf("metric %q: %v", line, err)
			}
			return int(n)
		}
	}
	t.Fatalf("replica %d's /metrics has no lockd_cache_cachers_revoked_total for demo", id)
	return 0
}

// maxAttackRounds bounds the attack's rounds: a round whose invalidation
// came with less than api.FairCacheAck of the hostile session's grant
// left is not held against it (it stalled the write less than that: the
// bound a leader keeps too), and the attack goes on. Through a proxy the
// grant ends with the proxy's own window, which on a loaded machine may
// be that short at every write (CI, 2026-12-07: stalls of 250-710 ms,
// none held); direct, a session renewing every 350 ms always has more,
// but a change of leader starts the count again.
const maxAttackRounds = 3 * api.MaxCacheMissesPerTenant

// proxyHeldLapses reads from the proxy's /metrics how many of its clients
// let a fair cache grant run out with an invalidation unacknowledged
// (lockproxy_cache_grant_lapses_total{held="true"}).
func proxyHeldLapses(t *testing.T, c *cluster.Cluster, addr string) int {
	t.Helper()
	ctx, cancel := ctxFor(10 * time.Second)
	defer cancel()
	_, body, err := authClient(c, cacheAttackAdminToken).Once(ctx, addr, http.MethodGet, api.RouteMetrics, nil, 0)
	must(t, err)
	const series = `lockproxy_cache_grant_lapses_total{held="true"} `
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series); ok {
			var n float64
			if _, err := fmt.Sscanf(rest, "%g", &n); err != nil {
				t.Fatalf("proxy metric %q: %v", line, err)
			}
			return int(n)
		}
	}
	return 0
}

// hostileAttackRounds runs rounds until charged reports
// api.MaxCacheMissesPerTenant of the tenant's sessions held to a miss (at
// most maxAttackRounds; through a proxy, a run that reaches none of them
// only logs it: its stalls were all under the fair time),
// each with a new hostile session
// caching cfg and 64 lock nodes of lk not yet created: a Put of cfg
// (waits for the hostile session at most one cache window), the session
// refused as a cacher after, then Lock/Unlock and more Puts while it
// goes on renewing.
func hostileAttackRounds(t *testing.T, viaProxy bool, attacker func() *cluster.Client, charged func() int, cfg, lk string, write func(*[]time.Duration) int, lockRound func(), putAttack *[]time.Duration) {
	t.Helper()
	paths := []string{cfg}
	for i := 0; i < 64; i++ {
		paths = append(paths, fmt.Sprintf("%s/w-%010d", lk, i))
	}
	var mu sync.Mutex
	round := 0
	for ; charged() < api.MaxCacheMissesPerTenant && round < maxAttackRounds; round++ {
		h, cached, servedBy := startHostileCacher(t, attacker(), paths)
		if !cached || (viaProxy && servedBy == "") {
			h.stop()
			t.Fatalf("round %d: the hostile session's read of %s was not made cacheable (by a proxy: %v, %q): the attack is not set up", round, cfg, viaProxy, servedBy)
		}
		n503 := write(putAttack)
		mu.Lock()
		t.Logf("round %d: the first put waited %v with %d unavailable answers", round, (*putAttack)[len(*putAttack)-1].Round(time.Millisecond), n503)
		mu.Unlock()
		if n503 > 1 {
			t.Errorf("round %d: %d unavailable answers before the put went through; want at most 1 (the server's 5 s timeout inside the 9 s cache window)", round, n503)
		}
		if h.recache(t, cfg) {
			t.Errorf("round %d: a session that let an invalidation's deadline pass was made a cacher again", round)
		}
		for i := 0; i < 3; i++ {
			lockRound()
			write(putAttack)
		}
		h.stop()
	}
	if n := charged(); n < api.MaxCacheMissesPerTenant {
		if !viaProxy {
			t.Fatalf("after %d rounds only %d of the hostile tenant's sessions were held to a missed invalidation, want %d", round, n, api.MaxCacheMissesPerTenant)
		}
		t.Logf("after %d rounds %d of the hostile tenant's sessions were held to a miss: the rest of its invalidations came with under %v of its grant left (the proxy's own window was short); the tenant's refusal is not reached this run",
			round, n, api.FairCacheAck(api.CacheWindow))
		return
	}
	// The tenant's sessions have missed api.MaxCacheMissesPerTenant
	// deadlines: a new one is not made a cacher, and writes do not wait.
	h, cached, _ := startHostileCacher(t, attacker(), paths)
	defer h.stop()
	if cached {
		t.Fatalf("after %d missed deadlines, a new session of the tenant was made a cacher again: it can stall a write per session", api.MaxCacheMissesPerTenant)
	}
	if n503 := write(putAttack); n503 != 0 {
		t.Fatalf("a put waited for a tenant refused as a cacher (%d unavailable answers)", n503)
	}
}
