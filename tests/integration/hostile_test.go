package integration_test

// The hostile-tenant suite (issue 22): a cluster run as operators run it
// for many teams (six lockds in three zones, two lockproxies, tokens
// required, mutual TLS), attacked through every entry point with every
// kind of credential. Each test names the deliberately broken build it
// fails on.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

const suiteAdminToken = "admin-token-of-the-hostile-suite"

// hostileEnv is the attacked cluster: its tenants' tokens, a session of
// the victim tenant alice, and the nodes whose state must not change.
type hostileEnv struct {
	c       *cluster.Cluster
	proxies []*cluster.Proxy
	adm     *sdk.Client
	tokens  map[string]string
	alice   api.SessionResponse // alice's session on demo
}

// hostileTenants: alice is the victim (write and lock on /demo/alice),
// reader may only read there, bob owns /payments/bob, gone had write on
// /demo/alice until its tokens were revoked, carol writes only
// /demo/team/carol (whose parent does not exist).
var hostileTenants = []api.Tenant{
	{Name: "alice", Grants: []api.Grant{{Prefix: "/demo/alice", Roles: []api.Role{api.RoleWrite, api.RoleLock}}}},
	{Name: "reader", Grants: []api.Grant{{Prefix: "/demo/alice", Roles: []api.Role{api.RoleRead}}}},
	{Name: "bob", Grants: []api.Grant{{Prefix: "/payments/bob", Roles: []api.Role{api.RoleWrite}}}},
	{Name: "gone", Grants: []api.Grant{{Prefix: "/demo/alice", Roles: []api.Role{api.RoleWrite}}}},
	{Name: "carol", Grants: []api.Grant{{Prefix: "/demo/team/carol", Roles: []api.Role{api.RoleWrite}}}},
	{Name: "watcher", Grants: []api.Grant{{Prefix: "/demo/alice", Roles: []api.Role{api.RoleRead}}}, Quota: api.Quota{Watches: 3}},
	{Name: "dave", Grants: []api.Grant{{Prefix: "/demo/dave", Roles: []api.Role{api.RoleWrite}}}},
	{Name: "nine", Grants: []api.Grant{{Prefix: "/team9", Roles: []api.Role{api.RoleWrite}}}, Quota: api.Quota{Nodes: 3}},
}

func startHostile(t *testing.T) *hostileEnv {
	t.Helper()
	c := cluster.Start(t, cluster.Options{Replicas: 5, Lockds: 6, Zones: 3, AdminToken: suiteAdminToken, TLS: true})
	e := &hostileEnv{c: c, tokens: map[string]string{}}
	for _, name := range []string{"hp1", "hp2"} {
		p, err := c.StartProxy(name)
		must(t, err)
		e.proxies = append(e.proxies, p)
	}
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	tc, err := c.ClientTLS().Client()
	must(t, err)
	e.adm, err = sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: suiteAdminToken, Direct: true, TLS: tc})
	must(t, err)
	t.Cleanup(func() { e.adm.Close() })
	for _, tn := range hostileTenants {
		var resp api.TenantResponse
		for attempt := 0; ; attempt++ {
			resp, err = e.adm.PutTenant(ctx, tn, true)
			if api.CodeOf(err) != api.CodeUnavailable || attempt == 100 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		must(t, err)
		e.tokens[tn.Name] = resp.Token
	}
	_, err = e.adm.RevokeTenantTokens(ctx, "gone")
	must(t, err)
	admin := c.NewClient()
	for _, p := range []string{"/demo/alice/cfg", "/payments/bob/cfg"} {
		mustDo(t, admin, api.RoutePut, api.PutRequest{Path: p, Value: []byte("v0"), MakeParents: true}, nil)
	}
	alice := c.NewClient()
	alice.Token = e.tokens["alice"]
	mustDo(t, alice, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo"}, &e.alice)
	e.keepAlive(t, alice)
	return e
}

// keepAlive renews alice's session until the test ends, so that the
// attacks on it meet a live session (and closing it would show).
func (e *hostileEnv) keepAlive(t *testing.T, alice *cluster.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			_ = alice.Do(cctx, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: e.alice.Session, Secret: e.alice.Secret}, nil)
			ccancel()
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}

// aliceLives reports whether alice's session is still live.
func (e *hostileEnv) aliceLives(t *testing.T) error {
	cl := e.c.NewClient()
	cl.Token = e.tokens["alice"]
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	return cl.Do(ctx, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: e.alice.Session, Secret: e.alice.Secret}, nil)
}

// entryPoints are every lockd's and every proxy's API address.
func (e *hostileEnv) entryPoints() []string {
	eps := e.c.Endpoints()
	for _, p := range e.proxies {
		eps = append(eps, p.Addr)
	}
	return eps
}

// raw is a one-attempt client sending header as its Authorization.
func (e *hostileEnv) raw(header string) *cluster.Client {
	cl := e.c.NewClient()
	cl.Token, cl.Authorization = "", header
	return cl
}

// routeClass is what a route needs of its caller.
type routeClass int

const (
	needsRead   routeClass = iota // the read role on /demo/alice
	needsWrite                    // the write role on /demo/alice
	needsAdmin                    // admin on /
	needsAny                      // any authenticated caller
	needsSecret                   // alice's session secret (the request carries a wrong one)
)

type hostileRoute struct {
	route, method string
	body          any
	class         routeClass
}

// hostileRoutes is every route of the API, each aimed at the victim's
// prefix or at the cluster, with the bodies an attacker would send.
func (e *hostileEnv) hostileRoutes() []hostileRoute {
	s, wrong := e.alice.Session, strings.Repeat("0", len(e.alice.Secret))
	return []hostileRoute{
		{api.RouteGet, "", api.ReadRequest{Path: "/demo/alice/cfg"}, needsRead},
		{api.RouteChildren, "", api.ReadRequest{Path: "/demo/alice"}, needsRead},
		{api.RouteLockQueue, "", api.LockQueueRequest{Path: "/demo/alice/lk"}, needsRead},
		{api.RouteLockCheck, "", api.LockCheckRequest{Path: "/demo/alice/lk", Token: 7}, needsRead},
		{api.RoutePut, "", api.PutRequest{Path: "/demo/alice/cfg", Value: []byte("pwned")}, needsWrite},
		{api.RouteCreate, "", api.CreateRequest{Path: "/demo/alice/new", Value: []byte("pwned")}, needsWrite},
		{api.RouteDelete, "", api.DeleteRequest{Path: "/demo/alice/cfg"}, needsWrite},
		{api.RouteSessionKeepAlive, "", api.KeepAliveRequest{Cell: "demo", Session: s, Secret: wrong}, needsSecret},
		{api.RouteSessionClose, "", api.CloseSessionRequest{Cell: "demo", Session: s, Secret: wrong}, needsSecret},
		{api.RouteLockState, "", api.LockStateRequest{Path: "/demo/alice/lk", Session: s, Secret: wrong}, needsSecret},
		{api.RouteWatch, "", api.WatchRequest{Cell: "demo", Session: s, Secret: wrong, Watches: []api.WatchSpec{{Path: "/demo/alice/cfg", Kind: api.WatchData}}}, needsSecret},
		{api.RouteDirectory, "GET", nil, needsAny},
		{api.RouteStatus, "GET", nil, needsAdmin},
		{api.RouteStatusCluster, "GET", nil, needsAdmin},
		{api.RouteStatusHealth, "GET", nil, needsAdmin},
		{api.RouteAdminTenants, "GET", nil, needsAdmin},
		{api.RouteAdminTenant, "", api.TenantRequest{Action: api.TenantPut, NewToken: true, Tenant: api.Tenant{Name: "evil", Grants: []api.Grant{{Prefix: "/", Roles: []api.Role{api.RoleAdmin}}}}}, needsAdmin},
		{api.RouteAdminTenant, "", api.TenantRequest{Action: api.TenantRevoke, Tenant: api.Tenant{Name: "alice"}}, needsAdmin},
		{api.RouteAdminTenantCommit, "", map[string]any{"name": "evil"}, needsAdmin},
		{api.RouteAdminMemberRecord, "", api.MemberRequest{Cell: "demo", Action: api.MemberRemove, Lockd: 1}, needsAdmin},
		{api.RouteAdminCellCreate, "", api.CreateCellRequest{Name: "evil"}, needsAdmin},
		{api.RouteAdminPrefixAssign, "", map[string]any{"prefix": "/evil", "cell": "demo"}, needsAdmin},
		{api.RouteAdminPrefixOp, "", api.PrefixOpRequest{Cell: "demo", Prefix: "/demo", Op: "seal", To: "payments"}, needsAdmin},
		{api.RouteAdminMigrate, "", api.MigrateRequest{Prefix: "/demo", To: "payments"}, needsAdmin},
		{api.RouteAdminMember, "", api.MemberRequest{Cell: "demo", Action: api.MemberRemove, Lockd: 5}, needsAdmin},
		{api.RouteAdminRestore, "", api.RestoreCellRequest{Cell: "demo"}, needsAdmin},
		{api.RouteAdminTransfer, "", api.TransferRequest{Cell: "demo", To: 2}, needsAdmin},
		{api.RouteAdminSnapshot, "", api.SnapshotRequest{Cell: "demo"}, needsAdmin},
		{api.RouteAdminBackup, "", map[string]any{"cell": "demo"}, needsAdmin},
		{api.RouteAdminRegister, "", map[string]any{"id": 99, "api_addr": "127.0.0.1:1", "raft_addr": "127.0.0.1:2"}, needsAdmin},
		{api.RouteAdminProxyRegister, "", api.ProxyInfo{Name: "evil", APIAddr: "127.0.0.1:1"}, needsAdmin},
		{api.RouteKeepAliveBatch, "", api.KeepAliveBatchRequest{Cell: "demo", Proxy: "evil", Sessions: []uint64{s}, AgeMS: []int64{0}}, needsAdmin},
	}
}

// credential is one kind of Authorization header an attacker sends.
type credential struct {
	name, header string
	authentic    bool   // a live token: refusals are 403 (or 401 for a wrong secret)
	tenant       string // whose token
}

func (e *hostileEnv) credentials() []credential {
	return []credential{
		{name: "none"},
		{name: "empty bearer", header: "Bearer "},
		{name: "bearer alone", header: "Bearer"},
		{name: "basic", header: "Basic YWRtaW46YWRtaW4="},
		{name: "two words", header: "Bearer " + e.tokens["alice"] + " x"},
		{name: "wrong token", header: "Bearer lkd_" + rand.Text()},
		{name: "admin token in the wrong scheme", header: "Token " + suiteAdminToken},
		{name: "revoked", header: "Bearer " + e.tokens["gone"]},
		{name: "another tenant's", header: "Bearer " + e.tokens["bob"], authentic: true, tenant: "bob"},
		{name: "a reader's", header: "Bearer " + e.tokens["reader"], authentic: true, tenant: "reader"},
	}
}

// want is the answer a credential must get on a route: the codes it
// may get, or none for "allowed" (anything but 401 and 403).
func (k credential) want(r hostileRoute) []api.Code {
	if !k.authentic {
		return []api.Code{api.CodeUnauthorized}
	}
	switch r.class {
	case needsAny:
		return nil
	case needsSecret:
		// A wrong secret (401), or no read role on the path first (403);
		// a replica that does not lead the cell sends it on without
		// looking at the session.
		return []api.Code{api.CodeUnauthorized, api.CodeForbidden, api.CodeNotLeader, api.CodeWrongCell}
	case needsRead:
		if k.tenant == "reader" {
			return nil
		}
	}
	return []api.Code{api.CodeForbidden}
}

// answers reports whether got is an answer want allows.
func answers(want []api.Code, got api.Code) bool {
	if len(want) == 0 {
		return got != api.CodeUnauthorized && got != api.CodeForbidden
	}
	return slices.Contains(want, got)
}

// TestHostileCredentials sends every route with every kind of credential
// to every lockd and every proxy, and checks each answer (401 without a
// live token, 403 outside the grants, allowed within them); then that
// nothing anywhere changed. Also: bodies past the limit refused before
// they are read, metrics labels that callers cannot multiply, a session
// nonce replayed by another tenant, make_parents outside a grant, a
// tenant's watch quota across its sessions and through a proxy, owners
// through a move. Fails
// on mutant lockproxy_broken_lendtoken (lockproxy), lockd_broken_routelabel,
// lockd_broken_bodylimit, lockd_broken_noncekey, lockd_broken_parentsfrom,
// lockd_broken_watchquota, lockd_broken_exportowner,
// lockd_broken_renewcheck, lockproxy_broken_proxywatchquota,
// lockproxy_broken_proxybody.
func TestHostileCredentials(t *testing.T) {
	t.Parallel()
	e := startHostile(t)
	before := e.snapshot(t)
	t.Run("matrix", func(t *testing.T) { e.matrix(t) })
	t.Run("nothing changed", func(t *testing.T) {
		if after := e.snapshot(t); after != before {
			t.Fatalf("the cluster changed under attack:\nbefore %s\nafter  %s", before, after)
		}
		if err := e.aliceLives(t); err != nil {
			t.Fatalf("alice's session after the attacks: %v", err)
		}
	})
	t.Run("bodies", func(t *testing.T) { e.bodies(t) })
	t.Run("metrics labels", func(t *testing.T) { e.metricsLabels(t) })
	t.Run("nonce replay", func(t *testing.T) { e.nonceReplay(t) })
	t.Run("make_parents", func(t *testing.T) { e.makeParents(t) })
	t.Run("watch quota across sessions", func(t *testing.T) { e.watchQuota(t) })
	t.Run("a move keeps owners", func(t *testing.T) { e.moveKeepsOwners(t) })
	t.Run("renewals", func(t *testing.T) { e.renewals(t) })
}

// renewals: a tenant renews only its own sessions, and once its tokens
// are revoked nobody renews its sessions, not even a lockproxy's batch
// (hole 4). Fails on mutant lockd_broken_renewcheck.
func (e *hostileEnv) renewals(t *testing.T) {
	bob := e.c.NewClient()
	bob.Token = e.tokens["bob"]
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	err := bob.Do(ctx, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: e.alice.Session, Secret: e.alice.Secret}, nil)
	if api.CodeOf(err) != api.CodeForbidden {
		t.Fatalf("bob renewing alice's session with its secret: %v, want forbidden", err)
	}
	dave := e.c.NewClient()
	dave.Token = e.tokens["dave"]
	var sess api.SessionResponse
	// A long lease: the session must outlive the wait for every lockd to
	// see the revocation (under load, longer than the cluster's 3 s), so
	// that the batch below is refused for the revocation, not the expiry.
	mustDo(t, dave, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo", LeaseMS: api.MaxLease.Milliseconds()}, &sess)
	_, err = e.adm.RevokeTenantTokens(ctx, "dave")
	must(t, err)
	// Every lockd's view has the revocation once dave's token fails there.
	for _, ep := range e.c.Endpoints() {
		for attempt := 0; ; attempt++ {
			status, _, err := dave.Once(ctx, ep, http.MethodGet, api.RouteDirectory, nil, 0)
			must(t, err)
			if status == http.StatusUnauthorized {
				break
			}
			if attempt == 100 {
				t.Fatalf("%s still takes a revoked token", ep)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// A proxy that still carries dave's session (its view lags, or it is
	// an old build) gets a refusal for it, not a renewal.
	var resp api.KeepAliveBatchResponse
	mustDo(t, e.c.NewClient(), api.RouteKeepAliveBatch, api.KeepAliveBatchRequest{Cell: "demo", Proxy: "stale-proxy",
		Sessions: []uint64{sess.Session}, Secrets: []string{sess.Secret}, AgeMS: []int64{0}}, &resp)
	for _, r := range resp.Sessions {
		if r.Session == sess.Session && r.Error != nil && r.Error.Code == api.CodeUnauthorized {
			return
		}
	}
	t.Fatalf("a batch renewed the revoked tenant's session: %+v", resp.Sessions)
}

// watchQuota: a tenant's watch quota holds across its sessions on a cell
// (hole 7): two sessions of a tenant allowed 3 watches arm 3 in all; and
// through a proxy, where the leader sees only the proxy's one watch per
// path, the proxy holds the tenant to it. Fails on mutant
// lockd_broken_watchquota and lockproxy_broken_proxywatchquota.
func (e *hostileEnv) watchQuota(t *testing.T) {
	cl := e.c.NewClient()
	cl.Token = e.tokens["watcher"]
	// Watches on paths that do not exist yet, since now: none fires at once.
	var now api.GetResponse
	mustDo(t, cl, api.RouteGet, api.ReadRequest{Path: "/demo/alice/cfg"}, &now)
	var specs [][]api.WatchSpec // per session
	for i := range 2 {
		specs = append(specs, nil)
		for j := range 2 {
			specs[i] = append(specs[i], api.WatchSpec{Path: fmt.Sprintf("/demo/alice/w%d-%d", i, j), Kind: api.WatchData, Since: now.Index})
		}
	}
	armed, refused := 0, 0
	for _, ws := range specs {
		var sess api.SessionResponse
		mustDo(t, cl, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo"}, &sess)
		a, r := armEach(t, cl, sess, ws)
		armed, refused = armed+a, refused+r
	}
	if armed != 3 || refused == 0 {
		t.Fatalf("a tenant allowed 3 watches armed %d over two sessions (%d refused)", armed, refused)
	}
	px := cluster.NewClient(e.proxies[1].Addr)
	px.UseTLS(e.clientTLS(t))
	px.Token = e.tokens["watcher"]
	var sess api.SessionResponse
	mustDo(t, px, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo"}, &sess)
	ka := api.KeepAliveRequest{Cell: "demo", Session: sess.Session, Secret: sess.Secret}
	var first api.SessionResponse
	mustDo(t, px, api.RouteSessionKeepAlive, ka, &first)
	ka.Proxy = first.Proxy // the proxy serves the watches of clients that name it
	mustDo(t, px, api.RouteSessionKeepAlive, ka, nil)
	var ws []api.WatchSpec
	for _, p := range []string{"/demo/alice/cfg", "/demo/alice"} {
		for _, k := range []api.WatchKind{api.WatchData, api.WatchChildren} {
			ws = append(ws, api.WatchSpec{Path: p, Kind: k, Since: now.Index})
		}
	}
	if armed, refused := armEach(t, px, sess, ws); armed != 3 || refused == 0 {
		t.Fatalf("through a proxy, a tenant allowed 3 watches armed %d (%d refused)", armed, refused)
	}
}

// armEach arms each watch in its own call on sess, and counts those armed
// and those refused quota_exceeded (anything else fails t).
func armEach(t *testing.T, cl *cluster.Client, sess api.SessionResponse, specs []api.WatchSpec) (armed, refused int) {
	t.Helper()
	for _, w := range specs {
		ctx, cancel := ctxFor(30 * time.Second)
		err := cl.Do(ctx, api.RouteWatch, api.WatchRequest{Cell: "demo", Session: sess.Session, Secret: sess.Secret, Watches: []api.WatchSpec{w}}, nil)
		cancel()
		switch api.CodeOf(err) {
		case "":
			armed++
		case api.CodeQuotaExceeded:
			refused++
		default:
			t.Fatalf("watch %+v: %v", w, err)
		}
	}
	return armed, refused
}

// clientTLS is the application's TLS configuration.
func (e *hostileEnv) clientTLS(t *testing.T) *tls.Config {
	tc, err := e.c.ClientTLS().Client()
	must(t, err)
	return tc
}

// moveKeepsOwners: a tenant's nodes keep their owner through a move, so
// its node quota holds on the new cell (hole 9). Fails on mutant
// lockd_broken_exportowner.
func (e *hostileEnv) moveKeepsOwners(t *testing.T) {
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	_, err := e.adm.AssignPrefix(ctx, "/team9", "demo")
	must(t, err)
	cl := e.c.NewClient()
	cl.Token = e.tokens["nine"]
	create := func(p string) error {
		// A lockd's view learns of an assignment or a move within moments.
		for attempt := 0; ; attempt++ {
			err := cl.Do(ctx, api.RoutePut, api.PutRequest{Path: p, Value: []byte("v")}, nil)
			if c := api.CodeOf(err); (c != api.CodeWrongCell && c != api.CodeMoved) || attempt == 100 {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, p := range []string{"/team9/a", "/team9/b", "/team9/c"} {
		must(t, create(p))
	}
	if err := create("/team9/d"); api.CodeOf(err) != api.CodeQuotaExceeded {
		t.Fatalf("a fourth node on demo: %v, want quota_exceeded", err)
	}
	res, err := e.adm.MovePrefix(ctx, "/team9", "payments", nil)
	must(t, err)
	t.Logf("moved /team9 to %s: %d nodes", res.To, res.Nodes)
	if err := create("/team9/d"); api.CodeOf(err) != api.CodeQuotaExceeded {
		t.Fatalf("a fourth node after the move: %v, want quota_exceeded (the moved nodes lost their owner)", err)
	}
}

// matrix: every entry point × credential × route, one attempt each.
func (e *hostileEnv) matrix(t *testing.T) {
	routes, creds := e.hostileRoutes(), e.credentials()
	var mu sync.Mutex
	var bad []string
	calls := 0
	var wg sync.WaitGroup
	for _, ep := range e.entryPoints() {
		wg.Go(func() {
			for _, k := range creds {
				cl := e.raw(k.header)
				for _, r := range routes {
					got, status := e.once(cl, ep, r)
					mu.Lock()
					calls++
					if w := k.want(r); !answers(w, got) {
						bad = append(bad, fmt.Sprintf("%s %s %s: HTTP %d %q, want one of %q (none: allowed)", ep, k.name, r.route, status, got, w))
					}
					mu.Unlock()
				}
				cl.Close()
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls: %d entry points × %d credentials × %d routes", calls, len(e.entryPoints()), len(creds), len(routes))
	if len(bad) > 0 {
		t.Fatalf("%d answers wrong, first ones:\n%s", len(bad), strings.Join(bad[:min(len(bad), 30)], "\n"))
	}
}

// once sends r to ep once and returns the error code ("" for a 2xx).
func (e *hostileEnv) once(cl *cluster.Client, ep string, r hostileRoute) (api.Code, int) {
	var body []byte
	method := r.method
	if method == "" {
		method = http.MethodPost
		body, _ = json.Marshal(r.body)
	}
	ctx, cancel := ctxFor(15 * time.Second)
	defer cancel()
	status, reply, err := cl.Once(ctx, ep, method, r.route, body, 10*time.Second)
	if err != nil {
		return api.Code("transport: " + err.Error()), 0
	}
	if status/100 == 2 {
		return "", status
	}
	return api.CodeOf(cluster.DecodeError(status, reply)), status
}

// snapshot is what the attacks must leave as it was: the victim's and
// bob's nodes, the tenants, cells and prefixes.
func (e *hostileEnv) snapshot(t *testing.T) string {
	t.Helper()
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	var b strings.Builder
	admin := e.c.NewClient()
	for _, p := range []string{"/demo/alice/cfg", "/payments/bob/cfg"} {
		var r api.GetResponse
		mustDo(t, admin, api.RouteGet, api.ReadRequest{Path: p}, &r)
		fmt.Fprintf(&b, "%s=%q v%d; ", p, r.Node.Value, r.Node.Version)
	}
	var kids api.ChildrenResponse
	mustDo(t, admin, api.RouteChildren, api.ReadRequest{Path: "/demo/alice"}, &kids)
	fmt.Fprintf(&b, "/demo/alice: %v; ", kids.Children)
	tenants, err := e.adm.Tenants(ctx)
	must(t, err)
	for _, tn := range tenants.Tenants {
		fmt.Fprintf(&b, "tenant %s tokens %d %v; ", tn.Name, tn.Tokens, tn.Grants)
	}
	must(t, e.adm.RefreshDirectory(ctx))
	d := e.adm.Directory()
	for _, c := range d.Cells {
		fmt.Fprintf(&b, "cell %s %v:", c.Name, c.Prefixes)
		for _, r := range c.Replicas {
			fmt.Fprintf(&b, " %d@%d learner=%v", r.ReplicaID, r.Lockd, r.Learner)
		}
		b.WriteString("; ")
	}
	for _, p := range d.Prefixes {
		fmt.Fprintf(&b, "prefix %s→%s e%d; ", p.Prefix, p.Cell, p.Epoch)
	}
	for _, p := range d.Proxies {
		fmt.Fprintf(&b, "proxy %s; ", p.Name)
	}
	return b.String()
}

// bodies: a body past the route's limit is refused with value_too_large
// before it is read, and a batch-sized body is taken only from an admin.
func (e *hostileEnv) bodies(t *testing.T) {
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = 'x'
	}
	lockd, proxy := e.c.APIAddr(1), e.proxies[0].Addr
	for _, tc := range []struct {
		name, ep, header, route string
		want                    api.Code
	}{
		{"no token, 1 MiB put", lockd, "", api.RoutePut, api.CodeUnauthorized},
		{"no token, 1 MiB to /metrics", lockd, "", api.RouteMetrics, api.CodeValueTooLarge},
		{"no token, 1 MiB to /healthz", lockd, "", api.RouteHealth, api.CodeValueTooLarge},
		{"reader, 1 MiB put", lockd, "Bearer " + e.tokens["reader"], api.RoutePut, api.CodeValueTooLarge},
		{"reader, 1 MiB batch", lockd, "Bearer " + e.tokens["reader"], api.RouteKeepAliveBatch, api.CodeValueTooLarge},
		{"admin, 1 MiB batch", lockd, "Bearer " + suiteAdminToken, api.RouteKeepAliveBatch, api.CodeBadRequest},
		{"no token, 1 MiB put at a proxy", proxy, "", api.RoutePut, api.CodeUnauthorized},
		{"no token, 1 MiB to a proxy's /healthz", proxy, "", api.RouteHealth, api.CodeValueTooLarge},
		{"no token, 1 MiB to a proxy's /metrics", proxy, "", api.RouteMetrics, api.CodeValueTooLarge},
		{"reader, 1 MiB put at a proxy", proxy, "Bearer " + e.tokens["reader"], api.RoutePut, api.CodeValueTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := e.raw(tc.header)
			defer cl.Close()
			ctx, cancel := ctxFor(30 * time.Second)
			defer cancel()
			status, reply, err := cl.Once(ctx, tc.ep, http.MethodPost, tc.route, big, 20*time.Second)
			if err != nil && tc.want != api.CodeBadRequest && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe")) {
				// Refused unread: the server answered and closed the
				// connection while the client was still sending.
				return
			}
			must(t, err)
			if code := api.CodeOf(cluster.DecodeError(status, reply)); code != tc.want {
				t.Fatalf("HTTP %d %q, want %q", status, code, tc.want)
			}
		})
	}
}

// metricsLabels: requests to made-up paths, with no credential or a
// reader's, do not add a metric series each (hole 8).
func (e *hostileEnv) metricsLabels(t *testing.T) {
	eps := []string{e.c.APIAddr(1), e.proxies[0].Addr}
	size := func(ep string) (int, string) {
		ctx, cancel := ctxFor(10 * time.Second)
		defer cancel()
		status, b, err := e.raw("").Once(ctx, ep, http.MethodGet, api.RouteMetrics, nil, 0)
		must(t, err)
		if status != http.StatusOK {
			t.Fatalf("%s /metrics: HTTP %d", ep, status)
		}
		return len(b), string(b)
	}
	for _, ep := range eps {
		before, _ := size(ep)
		marker := "zq" + strings.ToLower(rand.Text()[:8])
		for i := range 300 {
			header := ""
			if i%2 == 1 {
				header = "Bearer " + e.tokens["reader"]
			}
			cl := e.raw(header)
			ctx, cancel := ctxFor(10 * time.Second)
			_, _, err := cl.Once(ctx, ep, http.MethodPost, fmt.Sprintf("/%s/%d", marker, i), []byte("{}"), 0)
			cancel()
			cl.Close()
			must(t, err)
		}
		after, text := size(ep)
		t.Logf("%s: /metrics %d bytes before, %d after 300 made-up paths", ep, before, after)
		if strings.Contains(text, marker) {
			t.Fatalf("%s: /metrics labels a made-up path (%s…)", ep, marker)
		}
	}
}

// nonceReplay: a session open's nonce, replayed by another tenant, opens
// a session of its own; it never returns the first tenant's (hole 10).
func (e *hostileEnv) nonceReplay(t *testing.T) {
	nonce := "n-" + rand.Text()
	open := func(tenant string) api.SessionResponse {
		cl := e.c.NewClient()
		cl.Token = e.tokens[tenant]
		var r api.SessionResponse
		mustDo(t, cl, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo", Nonce: nonce}, &r)
		return r
	}
	a := open("alice")
	b := open("bob")
	if b.Session == a.Session || b.Secret == a.Secret {
		t.Fatalf("bob replayed alice's nonce and got session %d (alice's %d), same secret %v", b.Session, a.Session, b.Secret == a.Secret)
	}
	if again := open("alice"); again.Session != a.Session {
		t.Fatalf("alice's retried open got session %d, want %d", again.Session, a.Session)
	}
}

// makeParents: a tenant with write on /demo/team/carol cannot create
// /demo/team by make_parents (hole 10).
func (e *hostileEnv) makeParents(t *testing.T) {
	cl := e.c.NewClient()
	cl.Token = e.tokens["carol"]
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	for _, r := range []struct {
		route string
		body  any
	}{
		{api.RoutePut, api.PutRequest{Path: "/demo/team/carol/x", Value: []byte("v"), MakeParents: true}},
		{api.RouteCreate, api.CreateRequest{Path: "/demo/team/carol/y", MakeParents: true}},
	} {
		if err := cl.Do(ctx, r.route, r.body, nil); api.CodeOf(err) != api.CodeForbidden {
			t.Fatalf("%s with make_parents above the grant: %v, want forbidden", r.route, err)
		}
	}
	if err := e.c.NewClient().Do(ctx, api.RouteGet, api.ReadRequest{Path: "/demo/team"}, nil); api.CodeOf(err) != api.CodeNoNode {
		t.Fatalf("/demo/team was created outside carol's grant (get: %v)", err)
	}
	// Once an admin made /demo/team/carol, carol's make_parents below it works.
	mustDo(t, e.c.NewClient(), api.RoutePut, api.PutRequest{Path: "/demo/team/carol", MakeParents: true}, nil)
	if err := cl.Do(ctx, api.RoutePut, api.PutRequest{Path: "/demo/team/carol/a/b", Value: []byte("v"), MakeParents: true}, nil); err != nil {
		t.Fatalf("make_parents within the grant: %v", err)
	}
}
