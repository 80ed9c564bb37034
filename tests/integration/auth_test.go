package integration_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

const testAdminToken = "admin-token-of-the-auth-test"

// authClient is a raw HTTP client sending tok (none if "").
func authClient(c *cluster.Cluster, tok string) *cluster.Client {
	cl := cluster.NewClient(c.Endpoints()...)
	cl.Token = tok
	return cl
}

// TestTenantsACLsAndQuotas runs a cluster that requires tokens (three
// real lockds) and checks every ACL decision for each role, allowed and
// refused; no token, a wrong one, another tenant's prefix; admin-only
// routes; session secrets and ephemeral ownership; quotas of nodes,
// sessions and writes/s (429, nothing applied, others unaffected); a
// revoked token; and the SDK end to end, directly and through a proxy.
func TestTenantsACLsAndQuotas(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{Replicas: 3, AdminToken: testAdminToken})
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	adm, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: testAdminToken, Direct: true})
	must(t, err)
	defer adm.Close()
	tokens := map[string]string{}
	for _, tn := range []api.Tenant{
		{Name: "writer", Grants: []api.Grant{{Prefix: "/demo/a", Roles: []api.Role{api.RoleWrite}}}},
		{Name: "reader", Grants: []api.Grant{{Prefix: "/demo/a", Roles: []api.Role{api.RoleRead}}}},
		{Name: "locker", Grants: []api.Grant{{Prefix: "/demo/a", Roles: []api.Role{api.RoleLock}}}},
		{Name: "other", Grants: []api.Grant{{Prefix: "/demo/b", Roles: []api.Role{api.RoleWrite}}}},
		{Name: "tight", Grants: []api.Grant{{Prefix: "/demo/q", Roles: []api.Role{api.RoleWrite}}}, Quota: api.Quota{Nodes: 3, Sessions: 2}},
		{Name: "slow", Grants: []api.Grant{{Prefix: "/demo/r", Roles: []api.Role{api.RoleWrite}}}, Quota: api.Quota{WritesPerSec: 2}},
		{Name: "watcher", Grants: []api.Grant{{Prefix: "/demo/a", Roles: []api.Role{api.RoleRead}}}, Quota: api.Quota{Watches: 2}},
	} {
		// The directory group bootstraps just after the cells lead: a
		// refusal before that ("not bootstrapped") applied nothing.
		var resp api.TenantResponse
		for attempt := 0; ; attempt++ {
			resp, err = adm.PutTenant(ctx, tn, true)
			if api.CodeOf(err) != api.CodeUnavailable || attempt == 100 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		must(t, err)
		if resp.Token == "" || len(resp.Tenant.Tokens) != 0 {
			t.Fatalf("tenant %s: token %q, digests shown %v", tn.Name, resp.Token, resp.Tenant.Tokens)
		}
		tokens[tn.Name] = resp.Token
	}
	admin := authClient(c, testAdminToken)
	for _, p := range []string{"/demo/a/cfg", "/demo/b/cfg", "/demo/a/lk/keep", "/demo/q/keep", "/demo/r/keep"} {
		mustDo(t, admin, api.RoutePut, api.PutRequest{Path: p, Value: []byte("v"), MakeParents: true}, nil)
	}

	type call struct {
		name   string
		tenant string // "" no token, "?" a wrong one
		method string
		route  string
		body   any
		code   api.Code // "" allowed
	}
	put := func(p string) api.PutRequest { return api.PutRequest{Path: p, Value: []byte("x")} }
	get := func(p string) api.ReadRequest { return api.ReadRequest{Path: p} }
	calls := []call{
		{"no token", "", "", api.RouteGet, get("/demo/a/cfg"), api.CodeUnauthorized},
		{"wrong token", "?", "", api.RouteGet, get("/demo/a/cfg"), api.CodeUnauthorized},
		{"no token, status", "", "GET", api.RouteStatus, nil, api.CodeUnauthorized},
		{"reader get", "reader", "", api.RouteGet, get("/demo/a/cfg"), ""},
		{"reader children", "reader", "", api.RouteChildren, get("/demo/a"), ""},
		{"reader put", "reader", "", api.RoutePut, put("/demo/a/cfg"), api.CodeForbidden},
		{"reader create", "reader", "", api.RouteCreate, api.CreateRequest{Path: "/demo/a/n"}, api.CodeForbidden},
		{"reader delete", "reader", "", api.RouteDelete, api.DeleteRequest{Path: "/demo/a/cfg"}, api.CodeForbidden},
		{"reader, another prefix", "reader", "", api.RouteGet, get("/demo/b/cfg"), api.CodeForbidden},
		{"reader, the prefix's parent", "reader", "", api.RouteChildren, get("/demo"), api.CodeForbidden},
		{"writer get", "writer", "", api.RouteGet, get("/demo/a/cfg"), ""},
		{"writer put", "writer", "", api.RoutePut, put("/demo/a/w"), ""},
		{"writer create", "writer", "", api.RouteCreate, api.CreateRequest{Path: "/demo/a/n"}, ""},
		{"writer delete", "writer", "", api.RouteDelete, api.DeleteRequest{Path: "/demo/a/n"}, ""},
		{"writer, another tenant's prefix", "writer", "", api.RoutePut, put("/demo/b/cfg"), api.CodeForbidden},
		{"writer, another tenant's read", "writer", "", api.RouteGet, get("/demo/b/cfg"), api.CodeForbidden},
		{"writer, a sibling named alike", "writer", "", api.RoutePut, put("/demo/ab"), api.CodeForbidden},
		{"locker get", "locker", "", api.RouteGet, get("/demo/a/cfg"), ""},
		{"locker put", "locker", "", api.RoutePut, put("/demo/a/cfg"), api.CodeForbidden},
		{"locker plain create", "locker", "", api.RouteCreate, api.CreateRequest{Path: "/demo/a/p"}, api.CodeForbidden},
		{"writer creates a cell", "writer", "", api.RouteAdminCellCreate, api.CreateCellRequest{Name: "x"}, api.CodeForbidden},
		{"writer makes a tenant", "writer", "", api.RouteAdminTenant, api.TenantRequest{Action: api.TenantPut, Tenant: api.Tenant{Name: "w2"}}, api.CodeForbidden},
		{"writer lists tenants", "writer", "GET", api.RouteAdminTenants, nil, api.CodeForbidden},
		{"writer migrates", "writer", "", api.RouteAdminMigrate, api.MigrateRequest{Prefix: "/demo", To: "payments"}, api.CodeForbidden},
		{"writer adds a member", "writer", "", api.RouteAdminMember, api.MemberRequest{Cell: "demo", Action: api.MemberAdd, Lockd: 3}, api.CodeForbidden},
		{"writer restores", "writer", "", api.RouteAdminRestore, api.RestoreCellRequest{Cell: "demo"}, api.CodeForbidden},
		{"writer renews a batch", "writer", "", api.RouteKeepAliveBatch, api.KeepAliveBatchRequest{Cell: "demo", Proxy: "p"}, api.CodeForbidden},
		{"admin lists tenants", "admin", "GET", api.RouteAdminTenants, nil, ""},
	}
	tokens["admin"] = testAdminToken
	tokens["?"] = "lkd_not-a-token-of-anyone"
	for _, k := range calls {
		t.Run(k.name, func(t *testing.T) {
			method := k.method
			if method == "" {
				method = http.MethodPost
			}
			status, err := callStatus(authClient(c, tokens[k.tenant]), method, k.route, k.body)
			if api.CodeOf(err) != k.code || (k.code == "" && err != nil) {
				t.Fatalf("got %v, want %q", err, k.code)
			}
			if k.code != "" && status != k.code.HTTPStatus() {
				t.Fatalf("HTTP %d, want %d", status, k.code.HTTPStatus())
			}
		})
	}

	t.Run("directory shows tenants to admins only", func(t *testing.T) {
		var d api.DirectoryResponse
		status, body, err := authClient(c, tokens["writer"]).Raw(ctx, http.MethodGet, api.RouteDirectory, nil)
		must(t, err)
		if status != http.StatusOK || json.Unmarshal(body, &d) != nil || len(d.Tenants) != 0 {
			t.Fatalf("writer's directory: HTTP %d, %d tenants", status, len(d.Tenants))
		}
		must(t, adm.RefreshDirectory(ctx))
		if len(adm.Directory().Tenants) == 0 {
			t.Fatal("the admin's directory has no tenants")
		}
	})

	t.Run("session secrets and ephemeral ownership", func(t *testing.T) {
		locker, writer := authClient(c, tokens["locker"]), authClient(c, tokens["writer"])
		ls := openSession(t, locker, "demo", 5*time.Second)
		ws := openSession(t, writer, "demo", 5*time.Second)
		if ls.secret == "" || ls.secret == ws.secret {
			t.Fatalf("secrets %q and %q", ls.secret, ws.secret)
		}
		var cr api.CreateResponse
		mustDo(t, locker, api.RouteCreate, api.CreateRequest{WriteHeader: ls.header(), Path: "/demo/a/lk/lock-", Ephemeral: true, Sequential: true, Lock: api.LockExclusive}, &cr)
		guess := api.WriteHeader{Session: ls.id, Request: 99}
		for _, k := range []struct {
			name  string
			cl    *cluster.Client
			route string
			body  any
			code  api.Code
		}{
			{"keepalive without the secret", locker, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: ls.id}, api.CodeUnauthorized},
			{"close without the secret", writer, api.RouteSessionClose, api.CloseSessionRequest{Cell: "demo", Session: ls.id, Secret: ws.secret}, api.CodeUnauthorized},
			{"a write under it without the secret", locker, api.RouteDelete, api.DeleteRequest{WriteHeader: guess, Path: cr.Node.Path}, api.CodeUnauthorized},
			{"a watch on it without the secret", locker, api.RouteGet, api.ReadRequest{Path: "/demo/a/cfg", Session: ls.id, Watch: api.WatchData}, api.CodeUnauthorized},
			{"another session deletes its lock node", writer, api.RouteDelete, api.DeleteRequest{WriteHeader: ws.header(), Path: cr.Node.Path}, api.CodeForbidden},
			{"no session deletes its lock node", writer, api.RouteDelete, api.DeleteRequest{Path: cr.Node.Path}, api.CodeForbidden},
			{"the lock role deletes a persistent node", locker, api.RouteDelete, api.DeleteRequest{WriteHeader: ls.header(), Path: "/demo/a/lk/keep"}, api.CodeForbidden},
			{"the lock role puts a new persistent node", locker, api.RoutePut, api.PutRequest{WriteHeader: ls.header(), Path: "/demo/a/lk/new", Value: []byte("x")}, api.CodeForbidden},
		} {
			if err := do(k.cl, k.route, k.body, nil); api.CodeOf(err) != k.code {
				t.Errorf("%s: %v, want %s", k.name, err, k.code)
			}
		}
		// Nothing of it applied: the node is there, the session lives.
		var ka api.SessionResponse
		mustDo(t, locker, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: ls.id, Secret: ls.secret}, &ka)
		var g api.GetResponse
		mustDo(t, admin, api.RouteGet, get(cr.Node.Path), &g)
		// Its owner deletes it; an admin may delete anyone's.
		mustDo(t, locker, api.RouteDelete, api.DeleteRequest{WriteHeader: ls.header(), Path: cr.Node.Path}, nil)
		mustDo(t, locker, api.RouteCreate, api.CreateRequest{WriteHeader: ls.header(), Path: "/demo/a/lk/lock-", Ephemeral: true, Sequential: true, Lock: api.LockExclusive}, &cr)
		mustDo(t, admin, api.RouteDelete, api.DeleteRequest{Path: cr.Node.Path}, nil)
		must(t, ls.close())
		must(t, ws.close())
	})

	t.Run("quotas", func(t *testing.T) {
		tight := authClient(c, tokens["tight"])
		for i := 0; i < 3; i++ {
			mustDo(t, tight, api.RouteCreate, api.CreateRequest{Path: "/demo/q/n" + string(rune('0'+i))}, nil)
		}
		before, err := walk(admin, "/demo/q")
		must(t, err)
		status, err := callStatus(tight, http.MethodPost, api.RouteCreate, api.CreateRequest{Path: "/demo/q/n3"})
		if api.CodeOf(err) != api.CodeQuotaExceeded || status != http.StatusTooManyRequests {
			t.Fatalf("a fourth node: %v, want quota_exceeded (429)", err)
		}
		after, err := walk(admin, "/demo/q")
		must(t, err)
		if d := diff(before, after); d != "" {
			t.Fatalf("a refused create changed the state: %s", d)
		}
		s1 := openSession(t, tight, "demo", 3*time.Second)
		s2 := openSession(t, tight, "demo", 3*time.Second)
		if _, err := tryOpenSession(tight, "demo", 3*time.Second); api.CodeOf(err) != api.CodeQuotaExceeded {
			t.Fatalf("a third session: %v, want quota_exceeded", err)
		}
		// Another tenant is not held to tight's quota.
		mustDo(t, authClient(c, tokens["writer"]), api.RoutePut, put("/demo/a/still"), nil)
		// Freed, the quota has room again.
		must(t, s1.close())
		s3 := openSession(t, tight, "demo", 3*time.Second)
		must(t, s2.close())
		must(t, s3.close())
		mustDo(t, tight, api.RouteDelete, api.DeleteRequest{Path: "/demo/q/n0"}, nil)
		mustDo(t, tight, api.RouteCreate, api.CreateRequest{Path: "/demo/q/n3"}, nil)

		// Watches per session: the third is refused.
		watcher := authClient(c, tokens["watcher"])
		ws := openSession(t, watcher, "demo", 3*time.Second)
		for i, p := range []string{"/demo/a/cfg", "/demo/a/w", "/demo/a/still"} {
			err := do(watcher, api.RouteGet, api.ReadRequest{Path: p, Session: ws.id, Secret: ws.secret, Watch: api.WatchData}, nil)
			if want := api.Code(""); i == 2 {
				want = api.CodeQuotaExceeded
				if api.CodeOf(err) != want {
					t.Fatalf("watch %d: %v, want %s", i+1, err, want)
				}
			} else if err != nil {
				t.Fatalf("watch %d: %v", i+1, err)
			}
		}
		must(t, ws.close())

		// Writes per second: a burst past 2/s is refused, on one lockd.
		slow := cluster.NewClient(c.Endpoints()[0])
		slow.Token, slow.MaxAttempts = tokens["slow"], 1
		ok, refused := 0, 0
		for i := 0; i < 10; i++ {
			err := do(slow, api.RoutePut, put("/demo/r/keep"), nil)
			switch api.CodeOf(err) {
			case "":
				ok++
			case api.CodeQuotaExceeded:
				refused++
			case api.CodeNotLeader:
				// The refusal comes first: a follower answers not_leader
				// only to what passed the limit.
				ok++
			default:
				t.Fatalf("put %d: %v", i, err)
			}
		}
		if refused == 0 || ok == 0 {
			t.Fatalf("10 quick writes at 2/s: %d passed, %d refused", ok, refused)
		}
	})

	t.Run("the SDK as a tenant, direct and through a proxy", func(t *testing.T) {
		lc, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: tokens["locker"], Direct: true})
		must(t, err)
		defer lc.Close()
		m := lc.NewMutex("/demo/a/mx")
		must(t, m.Lock(ctx))
		must(t, m.Unlock(ctx))
		if err := lc.NewMutex("/demo/b/mx").TryLock(ctx, time.Second); api.CodeOf(err) != api.CodeForbidden {
			t.Fatalf("a lock on another tenant's prefix: %v, want forbidden", err)
		}

		p, err := c.StartProxy("auth-proxy")
		must(t, err)
		pc, err := sdk.New(ctx, sdk.Config{Endpoints: []string{p.Addr}, AuthToken: tokens["locker"]})
		must(t, err)
		defer pc.Close()
		m = pc.NewMutex("/demo/a/mx")
		must(t, m.Lock(ctx))
		must(t, m.Unlock(ctx))
		// Two readers known to the proxy (their KeepAlives name it): the
		// first read fills its shared cache, the second is served from it,
		// the proxy having checked the reader's own token may read the path.
		rc := proxiedReader(ctx, t, p.Addr, tokens["reader"])
		defer rc.Close()
		rc2 := proxiedReader(ctx, t, p.Addr, tokens["reader"])
		defer rc2.Close()
		// Read until the proxy serves one from its shared cache: a reader
		// counts as known once a KeepAlive naming the proxy has reached
		// it, which a loaded machine may delay.
		for i := 0; scrape(t, p.Addr, "lockproxy_cache_hits_total", "") < 1; i++ {
			if i == 100 {
				t.Fatalf("the proxy's shared cache served no read in %d rounds", i)
			}
			for _, cl := range []*sdk.Client{rc, rc2} {
				if _, err := cl.Get(ctx, "/demo/a/cfg"); err != nil {
					t.Fatalf("reader's cached read through the proxy: %v", err)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Another tenant, known to the proxy too: its cache must not serve
		// that tenant /demo/a (the proxy forwards it, and the lockd refuses).
		oc := proxiedReader(ctx, t, p.Addr, tokens["other"])
		defer oc.Close()
		if _, err := oc.Get(ctx, "/demo/a/cfg"); api.CodeOf(err) != api.CodeForbidden {
			t.Fatalf("another tenant's cached read through the proxy: %v, want forbidden", err)
		}
		if _, err := rc.Get(ctx, "/demo/b/cfg"); api.CodeOf(err) != api.CodeForbidden {
			t.Fatalf("reader's read of another prefix through the proxy: %v, want forbidden", err)
		}
		if _, _, _, err := rc.GetW(ctx, "/demo/b/cfg"); api.CodeOf(err) != api.CodeForbidden {
			t.Fatalf("reader's watch on another prefix through the proxy: %v, want forbidden", err)
		}
	})

	t.Run("a revoked token is refused", func(t *testing.T) {
		_, err := adm.RevokeTenantTokens(ctx, "writer")
		must(t, err)
		// Each lockd follows the directory; the one that committed the
		// revoke refuses at once, the others within their view's refresh.
		for _, ep := range c.Endpoints() {
			cl := cluster.NewClient(ep)
			cl.Token, cl.MaxAttempts = tokens["writer"], 1
			deadline := time.Now().Add(30 * time.Second)
			for {
				err := do(cl, api.RouteGet, get("/demo/a/cfg"), nil)
				if api.CodeOf(err) == api.CodeUnauthorized {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s still takes a revoked token: %v", ep, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
}

// callStatus makes one call (retried like Do) and returns its HTTP status
// and, for a non-2xx one, its error.
func callStatus(cl *cluster.Client, method, route string, body any) (int, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	status, reply, err := cl.Raw(ctx, method, route, b)
	if err != nil {
		return 0, err
	}
	if status/100 != 2 {
		return status, cluster.DecodeError(status, reply)
	}
	return status, nil
}

// proxiedReader is a client through the proxy at addr with a session on
// demo whose KeepAlives name the proxy (so its cached reads are the
// proxy's to serve).
func proxiedReader(ctx context.Context, t *testing.T, addr, token string) *sdk.Client {
	t.Helper()
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: []string{addr}, AuthToken: token})
	must(t, err)
	s, err := cl.Session(ctx, "demo")
	must(t, err)
	for i := 0; s.Proxy() == ""; i++ {
		if i == 300 {
			t.Fatal("no KeepAlive answered by the proxy within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the next KeepAlive, naming it, reaches the proxy
	return cl
}
