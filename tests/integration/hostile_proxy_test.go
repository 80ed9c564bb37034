package integration_test

// A hostile tenant against a lockproxy (issue 22, holes 3, 4, 6 and the
// proxy's side of 10): on real processes, a cluster that requires tokens
// and one proxy. Each test fails on the mutant named in its comment
// (LOCKD_MUTANT=<mutant> go test -tags lockd_mutants: make mutants).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

const hostileAdminToken = "admin-token-of-the-hostile-proxy-tests"

// hostileSetup starts three lockds requiring tokens, tenants and one proxy.
func hostileSetup(t *testing.T, tenants ...api.Tenant) (*cluster.Cluster, *cluster.Proxy, *sdk.Client, map[string]string) {
	t.Helper()
	c := cluster.Start(t, cluster.Options{Replicas: 3, AdminToken: hostileAdminToken})
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	adm, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: hostileAdminToken, Direct: true})
	must(t, err)
	t.Cleanup(func() { _ = adm.Close() })
	tokens := map[string]string{"admin": hostileAdminToken}
	for _, tn := range tenants {
		var resp api.TenantResponse
		for attempt := 0; ; attempt++ {
			resp, err = adm.PutTenant(ctx, tn, true)
			if api.CodeOf(err) != api.CodeUnavailable || attempt == 100 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		must(t, err)
		tokens[tn.Name] = resp.Token
	}
	admin := authClient(c, hostileAdminToken)
	mustDo(t, admin, api.RoutePut, api.PutRequest{Path: "/demo/a/cfg", Value: []byte("v1"), MakeParents: true}, nil)
	mustDo(t, admin, api.RoutePut, api.PutRequest{Path: "/demo/b/cfg", Value: []byte("v1"), MakeParents: true}, nil)
	p, err := c.StartProxy("hostile-proxy")
	must(t, err)
	return c, p, adm, tokens
}

func grant(name, prefix string, roles ...api.Role) api.Tenant {
	return api.Tenant{Name: name, Grants: []api.Grant{{Prefix: prefix, Roles: roles}}}
}

var rawHTTP = &http.Client{Timeout: 40 * time.Second}

// rawCall sends one request to addr with exactly the Authorization header
// auth ("" none) and returns the status and body.
func rawCall(addr, method, route, auth string, body any) (int, []byte, error) {
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, "http://"+addr+route, rd)
	if err != nil {
		return 0, nil, err
	}
	if auth != "" {
		req.Header.Set(api.HeaderAuth, auth)
	}
	resp, err := rawHTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), err
}

func bearer(tok string) string { return "Bearer " + tok }

// proxSession is a raw client session whose KeepAlives go through a proxy
// naming it (so the proxy serves its cached reads and watches).
type proxSession struct {
	addr, auth, secret string
	id                 uint64
	instance           atomic.Value // string
	pack               atomic.Uint64
	oks                atomic.Int64
	lastCode           atomic.Value // api.Code of the last refusal
	stop, done         chan struct{}
}

func openViaProxy(t *testing.T, addr, token string) *proxSession {
	t.Helper()
	var resp api.SessionResponse
	status, body, err := rawCall(addr, http.MethodPost, api.RouteSessionOpen, bearer(token), api.OpenSessionRequest{Cell: "demo"})
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &resp) != nil || resp.Session == 0 {
		t.Fatalf("open through the proxy: %d %s %v", status, body, err)
	}
	s := &proxSession{addr: addr, auth: bearer(token), id: resp.Session, secret: resp.Secret, stop: make(chan struct{}), done: make(chan struct{})}
	s.instance.Store("")
	s.lastCode.Store(api.Code(""))
	go s.loop()
	t.Cleanup(s.halt)
	for i := 0; s.oks.Load() < 2 || s.instance.Load().(string) == ""; i++ {
		if i == 300 {
			t.Fatalf("no KeepAlive of session %d answered by the proxy in 30 s (last %v)", s.id, s.lastCode.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s
}

func (s *proxSession) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// loop sends KeepAlives (wait 500 ms) acknowledging the proxy's events.
func (s *proxSession) loop() {
	defer close(s.done)
	for i := 0; i < 1_000_000; i++ {
		select {
		case <-s.stop:
			return
		default:
		}
		req := api.KeepAliveRequest{Cell: "demo", Session: s.id, Secret: s.secret, WaitMS: 500,
			Proxy: s.instance.Load().(string), ProxyAck: s.pack.Load()}
		status, body, err := rawCall(s.addr, http.MethodPost, api.RouteSessionKeepAlive, s.auth, req)
		var resp api.SessionResponse
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &resp) != nil {
			s.lastCode.Store(api.CodeOf(cluster.DecodeError(status, body)))
			time.Sleep(100 * time.Millisecond)
			continue
		}
		s.instance.Store(resp.Proxy)
		for _, ev := range resp.ProxyEvents {
			if ev.Seq > s.pack.Load() {
				s.pack.Store(ev.Seq)
			}
		}
		s.oks.Add(1)
	}
}

// proxyFigures are a proxy's memory, goroutines and watches.
type proxyFigures struct {
	rssKB                    int64
	goroutines, watches, own float64
}

func (f proxyFigures) String() string {
	return fmt.Sprintf("RSS %d KiB, %v goroutines, %v client watches, %v shared watches", f.rssKB, f.goroutines, f.watches, f.own)
}

func figuresOf(t *testing.T, p *cluster.Proxy) proxyFigures {
	t.Helper()
	f := proxyFigures{goroutines: scrape(t, p.Addr, "go_goroutines", ""), watches: scrape(t, p.Addr, "lockproxy_client_watches", ""),
		own: scrape(t, p.Addr, "lockproxy_shared_watches", "")}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	must(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f.rssKB, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return f
}

// TestHostileProxyBatchWedge (hole 3): a tenant sends KeepAlives for
// made-up sessions with 250 KB secrets (and with well-formed ones) while
// an honest client holds a lock through the same proxy. The proxy refuses
// them without keeping anything; its batches go on; the honest session
// keeps its lock through the attack and after it, and a new session is
// renewed through the proxy afterwards. Mutant: lockproxy_broken_batchsplit.
func TestHostileProxyBatchWedge(t *testing.T) {
	// Not parallel: eight attackers load the CPU while an honest session
	// with a 3 s lease must keep it; other clusters' load on the machine
	// would add to the attack.
	c, p, _, tokens := hostileSetup(t, grant("writer", "/demo/a", api.RoleWrite), grant("attacker", "/demo/b", api.RoleRead))
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	hc, err := sdk.New(ctx, sdk.Config{Endpoints: []string{p.Addr}, AuthToken: tokens["writer"], Lease: 3 * time.Second})
	must(t, err)
	defer hc.Close()
	hs, err := hc.Session(ctx, "demo")
	must(t, err)
	m := hc.NewMutex("/demo/a/mx")
	must(t, m.Lock(ctx))
	node := m.Node()
	before := figuresOf(t, p)

	huge := strings.Repeat("<", 250_000) // escaped six-fold in a batch's JSON
	var refused sync.Map
	var wg sync.WaitGroup
	attackEnd := time.Now().Add(4 * hs.Lease())
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 10_000 && time.Now().Before(attackEnd); n++ {
				secret := huge
				if n%2 == 1 {
					secret = fmt.Sprintf("%032x", n) // well-formed, made up
				}
				// Raw, as an attacker sends it: 250 KB of '<' (a JSON
				// encoder would escape each to six bytes), each time for
				// another made-up session.
				body := fmt.Sprintf(`{"cell":"demo","session":%d,"secret":"%s","wait_ms":1000}`, 1_000_000_000+100_000*i+n, secret)
				status, reply, err := rawCall(p.Addr, http.MethodPost, api.RouteSessionKeepAlive, bearer(tokens["attacker"]), []byte(body))
				k := fmt.Sprintf("HTTP %d %s", status, api.CodeOf(cluster.DecodeError(status, reply)))
				if err != nil {
					k = "transport error"
				}
				v, _ := refused.LoadOrStore(k, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	during := figuresOf(t, p)
	refused.Range(func(k, v any) bool {
		t.Logf("attack KeepAlives answered %s: %d", k, v.(*atomic.Int64).Load())
		return true
	})
	time.Sleep(2 * hs.Lease()) // after the attack
	if err := hs.Err(); err != nil || !m.Held() {
		t.Fatalf("the honest session did not survive the attack: err %v, held %v (proxy log %s)", err, m.Held(), p.LogPath)
	}
	var g api.GetResponse
	if err := do(authClient(c, hostileAdminToken), api.RouteGet, api.ReadRequest{Path: node}, &g); err != nil {
		t.Fatalf("the honest lock node %s after the attack: %v", node, err)
	}
	// The batch loop is not stuck: a new session is renewed through the proxy.
	fresh := openViaProxy(t, p.Addr, tokens["writer"])
	n0 := fresh.oks.Load()
	time.Sleep(2 * time.Second)
	if fresh.oks.Load() <= n0 {
		t.Fatalf("a new session is not renewed through the proxy after the attack (last %v)", fresh.lastCode.Load())
	}
	after := figuresOf(t, p)
	t.Logf("proxy before the attack: %v; right after: %v; two leases later: %v", before, during, after)
	t.Logf("batches %v, batch errors %v", scrape(t, p.Addr, "lockproxy_keepalive_batches_total", ""), scrape(t, p.Addr, "lockproxy_keepalive_batch_errors_total", ""))
	must(t, m.Unlock(ctx))
}

// TestHostileProxyWatchFlood (hole 6): 30 watch calls of 1 024 specs each
// on one path, every spec at another index, from one session. The proxy
// holds one watch for it (one per client, path and kind). Mutant:
// lockproxy_broken_watchkey.
func TestHostileProxyWatchFlood(t *testing.T) {
	t.Parallel()
	_, p, _, tokens := hostileSetup(t, grant("reader", "/demo/a", api.RoleRead))
	s := openViaProxy(t, p.Addr, tokens["reader"])
	before := figuresOf(t, p)
	codes := map[int]int{}
	for i := 0; i < 30; i++ {
		specs := make([]api.WatchSpec, api.MaxWatchesPerCall)
		for j := range specs {
			specs[j] = api.WatchSpec{Path: "/demo/a/cfg", Kind: api.WatchData, Since: uint64(i*api.MaxWatchesPerCall + j + 1)}
		}
		status, _, err := rawCall(p.Addr, http.MethodPost, api.RouteWatch, bearer(tokens["reader"]), api.WatchRequest{Cell: "demo", Session: s.id, Secret: s.secret, Watches: specs})
		must(t, err)
		codes[status]++
	}
	after := figuresOf(t, p)
	t.Logf("30 × %d watch specs on one path: HTTP statuses %v", api.MaxWatchesPerCall, codes)
	t.Logf("proxy before: %v; after: %v", before, after)
	if after.own < 1 {
		t.Fatal("the proxy holds no watch: the flood was not served by it")
	}
	if after.watches > before.watches+2 || after.own > before.own+2 {
		t.Fatalf("the proxy's watches grew from %v to %v client, %v to %v shared, for one path", before.watches, after.watches, before.own, after.own)
	}
	if after.goroutines > before.goroutines+50 {
		t.Fatalf("the proxy's goroutines grew from %v to %v", before.goroutines, after.goroutines)
	}
}

// TestHostileProxyRevoke (hole 4): a tenant reads /demo/a/cfg cached
// through the proxy (from the proxy's own session) and holds an ephemeral
// node; the admin revokes its tokens. Within api.ProxyAuthRefresh (plus
// a directory read) the proxy refuses it 401, and its session, renewed
// through the proxy, ends within a lease. Mutant: lockproxy_broken_revoke.
func TestHostileProxyRevoke(t *testing.T) {
	t.Parallel()
	c, p, adm, tokens := hostileSetup(t, grant("victim", "/demo/a", api.RoleWrite))
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	s := openViaProxy(t, p.Addr, tokens["victim"])
	eph := "/demo/a/eph-victim"
	status, body, err := rawCall(p.Addr, http.MethodPost, api.RouteCreate, bearer(tokens["victim"]),
		api.CreateRequest{WriteHeader: api.WriteHeader{Session: s.id, Secret: s.secret, Request: 1, Ack: 1}, Path: eph, Ephemeral: true})
	if err != nil || status != http.StatusOK {
		t.Fatalf("ephemeral node through the proxy: %d %s %v", status, body, err)
	}
	cached := api.ReadRequest{Path: "/demo/a/cfg", Session: s.id, Secret: s.secret, Cache: true, CacheWindowMS: api.CacheWindow.Milliseconds()}
	var g api.GetResponse
	status, body, err = rawCall(p.Addr, http.MethodPost, api.RouteGet, bearer(tokens["victim"]), cached)
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &g) != nil || g.Proxy == "" {
		t.Fatalf("cached read through the proxy: %d %s %v (want one served from the proxy's cache)", status, body, err)
	}

	_, err = adm.RevokeTenantTokens(ctx, "victim")
	must(t, err)
	revoked := time.Now()
	bound := api.ProxyAuthRefresh + 3*time.Second // the refresh, one directory read, slack for a loaded machine
	for {
		status, body, err = rawCall(p.Addr, http.MethodPost, api.RouteGet, bearer(tokens["victim"]), cached)
		if err == nil && status == http.StatusUnauthorized {
			break
		}
		if time.Since(revoked) > bound {
			t.Fatalf("the proxy still answers a revoked token %v after the revoke: %d %s %v", time.Since(revoked).Round(time.Millisecond), status, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	refusedAfter := time.Since(revoked)
	admin := authClient(c, hostileAdminToken)
	lease := c.Options().Lease
	for {
		err := do(admin, api.RouteGet, api.ReadRequest{Path: eph}, nil)
		if api.CodeOf(err) == api.CodeNoNode {
			break
		}
		if time.Since(revoked) > bound+2*lease+5*time.Second {
			t.Fatalf("the revoked tenant's session still holds %s %v after the revoke (its KeepAlives: %v)", eph, time.Since(revoked).Round(time.Millisecond), s.lastCode.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("after the revoke: the proxy refused the token after %v; the session (lease %v) ended after %v; its KeepAlives got %v",
		refusedAfter.Round(time.Millisecond), lease, time.Since(revoked).Round(time.Millisecond), s.lastCode.Load())
}

// TestHostileProxyCredentials (hole 4 and 10, the proxy's side): every
// route the proxy answers itself, with every kind of credential: none, an
// empty bearer, a malformed header, a wrong token, a revoked one, another
// tenant's, the tenant's own, an admin's. /healthz and /metrics need
// none; an unknown route is labelled "other" in the metrics.
func TestHostileProxyCredentials(t *testing.T) {
	t.Parallel()
	_, p, adm, tokens := hostileSetup(t, grant("reader", "/demo/a", api.RoleRead), grant("other", "/demo/b", api.RoleRead), grant("gone", "/demo/a", api.RoleRead))
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	s := openViaProxy(t, p.Addr, tokens["reader"])
	_, err := adm.RevokeTenantTokens(ctx, "gone")
	must(t, err)
	time.Sleep(api.ProxyAuthRefresh + time.Second)

	ka := api.KeepAliveRequest{Cell: "demo", Session: s.id, Secret: s.secret}
	cachedGet := api.ReadRequest{Path: "/demo/a/cfg", Session: s.id, Secret: s.secret, Cache: true, CacheWindowMS: api.CacheWindow.Milliseconds()}
	watchGet := api.ReadRequest{Path: "/demo/a/cfg", Session: s.id, Secret: s.secret, Watch: api.WatchData}
	rearm := api.WatchRequest{Cell: "demo", Session: s.id, Secret: s.secret, Watches: []api.WatchSpec{{Path: "/demo/a/cfg", Kind: api.WatchData, Since: 1}}}
	type route struct {
		name, method, path string
		body               any
		asReader, asOther  int // statuses for the tenant's own token and another tenant's
		asAdmin            int
	}
	routes := []route{
		{"keepalive", http.MethodPost, api.RouteSessionKeepAlive, ka, 200, 403, 200},
		{"cached get", http.MethodPost, api.RouteGet, cachedGet, 200, 403, 200},
		{"watch get", http.MethodPost, api.RouteGet, watchGet, 200, 403, 200},
		{"watch rearm", http.MethodPost, api.RouteWatch, rearm, 200, 403, 200},
		{"status", http.MethodGet, api.RouteStatus, nil, 403, 403, 200},
	}
	creds := []struct {
		name, header string
		want         func(route) int
	}{
		{"none", "", func(route) int { return 401 }},
		{"empty bearer", "Bearer ", func(route) int { return 401 }},
		{"malformed", "Basic " + tokens["reader"], func(route) int { return 401 }},
		{"wrong", bearer("lkd_not-a-token-of-anyone"), func(route) int { return 401 }},
		{"revoked", bearer(tokens["gone"]), func(route) int { return 401 }},
		{"another tenant's", bearer(tokens["other"]), func(r route) int { return r.asOther }},
		{"the tenant's own", bearer(tokens["reader"]), func(r route) int { return r.asReader }},
		{"admin", bearer(tokens["admin"]), func(r route) int { return r.asAdmin }},
	}
	for _, r := range routes {
		for _, cr := range creds {
			t.Run(r.name+"/"+cr.name, func(t *testing.T) {
				status, body, err := rawCall(p.Addr, r.method, r.path, cr.header, r.body)
				must(t, err)
				if want := cr.want(r); status != want {
					t.Fatalf("HTTP %d (%s), want %d", status, body, want)
				}
			})
		}
	}
	for _, open := range []string{api.RouteHealth, api.RouteMetrics} {
		if status, _, err := rawCall(p.Addr, http.MethodGet, open, "", nil); err != nil || status != 200 {
			t.Errorf("%s without credentials: %d %v", open, status, err)
		}
	}
	for i := 0; i < 20; i++ {
		// Without a token they are refused before they are counted; with
		// one, they are counted under one label.
		_, _, _ = rawCall(p.Addr, http.MethodPost, fmt.Sprintf("/v1/made-up-%d", i), "", []byte("{}"))
		_, _, _ = rawCall(p.Addr, http.MethodPost, fmt.Sprintf("/v1/made-up-%d", i), bearer(tokens["reader"]), []byte("{}"))
	}
	_, metrics, err := rawCall(p.Addr, http.MethodGet, api.RouteMetrics, "", nil)
	must(t, err)
	if strings.Contains(string(metrics), "made-up") || !strings.Contains(string(metrics), `route="other"`) {
		t.Fatal("the proxy labels made-up routes by their path, not as \"other\"")
	}
}
