package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

const goodSecret = "0123456789abcdef0123456789abcdef"

// TestRequestBounds: every field of a request the proxy acts on itself is
// bounded; past a bound it is refused with a stable code.
func TestRequestBounds(t *testing.T) {
	long := strings.Repeat("x", api.MaxRequestNameLen+1)
	specs := func(n int) []api.WatchSpec {
		out := make([]api.WatchSpec, n)
		for i := range out {
			out[i] = api.WatchSpec{Path: "/demo/a", Kind: api.WatchData}
		}
		return out
	}
	for _, c := range []struct {
		name string
		err  error
		want api.Code
	}{
		{"keepalive", checkKeepAlive(api.KeepAliveRequest{Cell: "demo", Session: 1, Secret: goodSecret}), ""},
		{"keepalive, no session", checkKeepAlive(api.KeepAliveRequest{Cell: "demo", Secret: goodSecret}), api.CodeNoSession},
		{"keepalive, 250 KB secret", checkKeepAlive(api.KeepAliveRequest{Cell: "demo", Session: 1, Secret: strings.Repeat("<", 250_000)}), api.CodeBadRequest},
		{"keepalive, short secret", checkKeepAlive(api.KeepAliveRequest{Cell: "demo", Session: 1, Secret: goodSecret[1:]}), api.CodeBadRequest},
		{"keepalive, upper-case secret", checkKeepAlive(api.KeepAliveRequest{Cell: "demo", Session: 1, Secret: strings.ToUpper(goodSecret)}), api.CodeBadRequest},
		{"keepalive, no secret", checkKeepAlive(api.KeepAliveRequest{Cell: "demo", Session: 1}), api.CodeBadRequest},
		{"keepalive, long cell", checkKeepAlive(api.KeepAliveRequest{Cell: long, Session: 1, Secret: goodSecret}), api.CodeBadRequest},
		{"keepalive, long proxy", checkKeepAlive(api.KeepAliveRequest{Cell: "demo", Proxy: long, Session: 1, Secret: goodSecret}), api.CodeBadRequest},
		{"keepalive, negative wait", checkKeepAlive(api.KeepAliveRequest{Cell: "demo", Session: 1, Secret: goodSecret, WaitMS: -1}), api.CodeBadRequest},
		{"read", checkRead(api.ReadRequest{Path: "/demo/a", Session: 1, Secret: goodSecret, Cache: true}), ""},
		{"read, bad path", checkRead(api.ReadRequest{Path: "demo//a", Session: 1, Secret: goodSecret}), api.CodeInvalidPath},
		{"read, bad kind", checkRead(api.ReadRequest{Path: "/demo/a", Session: 1, Secret: goodSecret, Watch: "all"}), api.CodeBadRequest},
		{"read, bad secret", checkRead(api.ReadRequest{Path: "/demo/a", Session: 1, Secret: "x"}), api.CodeBadRequest},
		{"watch", checkWatch(api.WatchRequest{Cell: "demo", Session: 1, Secret: goodSecret, Watches: specs(api.MaxWatchesPerCall)}), ""},
		{"watch, too many", checkWatch(api.WatchRequest{Cell: "demo", Session: 1, Secret: goodSecret, Watches: specs(api.MaxWatchesPerCall + 1)}), api.CodeBadRequest},
		{"watch, bad path", checkWatch(api.WatchRequest{Cell: "demo", Session: 1, Secret: goodSecret, Watches: []api.WatchSpec{{Path: "x", Kind: api.WatchData}}}), api.CodeInvalidPath},
		{"watch, bad kind", checkWatch(api.WatchRequest{Cell: "demo", Session: 1, Secret: goodSecret, Watches: []api.WatchSpec{{Path: "/demo/a", Kind: "x"}}}), api.CodeBadRequest},
	} {
		if got := api.CodeOf(c.err); got != c.want || (c.want == "" && c.err != nil) {
			t.Errorf("%s: %v, want %q", c.name, c.err, c.want)
		}
	}
}

// TestSplitBatch: a batch is cut by sessions and by bytes; every session
// goes in exactly one part with its age, secret and ack.
func TestSplitBatch(t *testing.T) {
	sessions := map[uint64]*proxySession{}
	for i := uint64(1); i <= 25; i++ {
		sessions[i] = &proxySession{id: i, lastKA: t0, secret: goodSecret, ack: ack{1, i}}
	}
	req, items, _ := buildBatch("demo", "p1", 1, sessions, t0, fullBatch, time.Second, nil)
	for _, c := range []struct {
		name            string
		maxN, maxBytes  int
		parts, largestN int
	}{
		{"by count", 10, 1 << 20, 3, 10},
		{"by bytes", 1000, 256 + 3*itemBytes(&req, 0, true), 9, 3},
		{"one part", 1000, 1 << 20, 1, 25},
		{"one session per part, however small the byte bound", 1000, 1, 25, 1},
	} {
		parts := splitBatch(req, items, c.maxN, c.maxBytes)
		seen := map[uint64]bool{}
		largest := 0
		for _, p := range parts {
			largest = max(largest, len(p.items))
			if len(p.req.Sessions) != len(p.items) || len(p.req.AgeMS) != len(p.items) || len(p.req.Secrets) != len(p.items) || len(p.req.Acks) != len(p.items) {
				t.Fatalf("%s: a part of %d items carries %d sessions, %d ages, %d secrets, %d acks", c.name, len(p.items), len(p.req.Sessions), len(p.req.AgeMS), len(p.req.Secrets), len(p.req.Acks))
			}
			for i, id := range p.req.Sessions {
				if seen[id] || p.items[i].ps.id != id || p.req.Acks[i].Session != id || p.req.WaitMS != 1000 {
					t.Fatalf("%s: session %d misplaced", c.name, id)
				}
				seen[id] = true
			}
		}
		if len(parts) != c.parts || largest != c.largestN || len(seen) != 25 {
			t.Errorf("%s: %d parts (largest %d) with %d sessions, want %d (largest %d) with 25", c.name, len(parts), largest, len(seen), c.parts, c.largestN)
		}
	}
	if halves := (batchPart{req: req, items: items}).halves(); len(halves) != 2 || len(halves[0].items)+len(halves[1].items) != 25 {
		t.Fatalf("halves of 25: %d parts", len(halves))
	}
	if parts := splitBatch(api.KeepAliveBatchRequest{Cell: "demo"}, nil, 10, 1000); len(parts) != 1 {
		t.Fatal("a poll with no sessions must still go")
	}
}

// TestBatchRefusals: a reply refusing one session ends that one only; a
// session whose tenant holds no token is not renewed and its client told.
func TestBatchRefusals(t *testing.T) {
	mk := func() map[uint64]*proxySession {
		return map[uint64]*proxySession{
			1: {id: 1, lease: 12 * time.Second, lastKA: t0, base: t0.Add(-time.Second), tenant: "a"},
			2: {id: 2, lease: 12 * time.Second, lastKA: t0, base: t0.Add(-time.Second), tenant: "b"},
			3: {id: 3, lease: 12 * time.Second, lastKA: t0, base: t0.Add(-time.Second)},
		}
	}
	for _, c := range []struct {
		name    string
		refuse  api.Code
		live    func(string) bool
		renewed []uint64
		ended   []uint64
	}{
		{"all renewed", "", nil, []uint64{1, 2, 3}, nil},
		{"one refused unauthorized", api.CodeUnauthorized, nil, []uint64{1, 3}, []uint64{2}},
		{"one unknown", api.CodeNoSession, nil, []uint64{1, 3}, []uint64{2}},
		{"one unavailable: tried again", api.CodeUnavailable, nil, []uint64{1, 3}, nil},
		{"tenant b revoked", "", func(n string) bool { return n != "b" }, []uint64{1, 3}, []uint64{2}},
	} {
		all := mk()
		req, items, _ := buildBatch("demo", "p1", 1, all, t0.Add(time.Second), fullBatch, 0, c.live)
		resp := api.KeepAliveBatchResponse{Epoch: 1}
		if c.refuse != "" {
			resp.Sessions = []api.BatchSession{{Session: 2, Error: api.Errorf(c.refuse, "no")}}
		}
		epoch := uint64(1)
		applyReply(&epoch, all, items, resp)
		var renewed, ended []uint64
		for id := uint64(1); id <= 3; id++ {
			if all[id].base.Equal(t0) {
				renewed = append(renewed, id)
			}
			if all[id].err != nil {
				ended = append(ended, id)
			}
		}
		if fmt.Sprint(renewed) != fmt.Sprint(c.renewed) || fmt.Sprint(ended) != fmt.Sprint(c.ended) {
			t.Errorf("%s: renewed %v ended %v (batch %v), want %v and %v", c.name, renewed, ended, req.Sessions, c.renewed, c.ended)
		}
	}
}

// TestWatchDedupe: a client's watches are one per path and kind at the
// proxy whatever index it arms them at; one armed further back than the
// proxy watches from fires at once; the caps refuse with limit_exceeded.
func TestWatchDedupe(t *testing.T) {
	tb, ps := sharedTable()
	key := keyOf("/demo/a", api.WatchData, 0)
	sw := &sharedWatch{key: key, armed: 100, subs: map[uint64]*proxySession{}, stop: make(chan struct{})}
	tb.watches[key] = sw
	spec := func(path string, since uint64) api.WatchSpec {
		return api.WatchSpec{Path: path, Kind: api.WatchData, Since: since}
	}
	for _, c := range []struct {
		name       string
		specs      []api.WatchSpec
		arm, fired int
		waits      int
		want       api.Code
	}{
		{"1 024 indexes at or past the proxy's: one wait", func() []api.WatchSpec {
			var out []api.WatchSpec
			for i := range api.MaxWatchesPerCall {
				out = append(out, spec("/demo/a", uint64(100+i)))
			}
			return out
		}(), 0, 0, 1, ""},
		{"again: still one", []api.WatchSpec{spec("/demo/a", 150), spec("/demo/a", 500)}, 0, 0, 1, ""},
		{"a new path: the cell arms it once", []api.WatchSpec{spec("/demo/b", 7), spec("/demo/b", 3)}, 1, 0, 1, ""},
		{"further back than the proxy: fires now", []api.WatchSpec{spec("/demo/a", 50)}, 0, 1, 0, ""},
	} {
		tb.mu.Lock()
		n := len(ps.pevents)
		arm, err := tb.planRearmLocked(ps, c.specs)
		fired, waits := len(ps.pevents)-n, len(ps.watches)
		tb.mu.Unlock()
		if api.CodeOf(err) != c.want || len(arm) != c.arm || fired != c.fired || waits != c.waits {
			t.Errorf("%s: err %v, %d to arm, %d fired, %d waits; want %q, %d, %d, %d", c.name, err, len(arm), fired, waits, c.want, c.arm, c.fired, c.waits)
		}
		if c.arm == 1 && arm[0].Since != 3 {
			t.Errorf("%s: armed at %d, want the least index asked (3)", c.name, arm[0].Since)
		}
	}
	// The session cap: past it arming is refused.
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for i := range api.MaxProxyWatchesPerSession + 1 {
		k := keyOf(fmt.Sprintf("/demo/n%d", i), api.WatchData, 0)
		other := &sharedWatch{key: k, subs: map[uint64]*proxySession{}, stop: make(chan struct{})}
		tb.watches[k] = other
		err := tb.subscribeLocked(ps, other)
		if want := i >= api.MaxProxyWatchesPerSession; (api.CodeOf(err) == api.CodeLimitExceeded) != want {
			t.Fatalf("watch %d: %v", i+1, err)
		}
	}
	if _, err := tb.planRearmLocked(ps, []api.WatchSpec{spec("/demo/new", 1)}); api.CodeOf(err) != api.CodeLimitExceeded {
		t.Fatalf("a new watch past the session's cap: %v", err)
	}
	tb.dropWatchesLocked(ps)
	if len(ps.watches) != 0 || len(tb.quota.per) != 0 {
		t.Fatalf("a forgotten client keeps %d waits, quota %v", len(ps.watches), tb.quota.per)
	}
}

// TestAuthDecisions: what the proxy answers itself needs a token it knows
// (its own, or a tenant's in its view), as a lockd would.
func TestAuthDecisions(t *testing.T) {
	p := &Proxy{cfg: Config{Token: "own"}, ownDigest: api.TokenDigest("own")}
	p.auth.kick = make(chan struct{}, 1)
	reader := api.Tenant{Name: "reader", Grants: []api.Grant{{Prefix: "/demo/a", Roles: []api.Role{api.RoleRead}}}, Tokens: []string{api.TokenDigest("r")}}
	boss := api.Tenant{Name: "boss", Grants: []api.Grant{{Prefix: "/", Roles: []api.Role{api.RoleAdmin}}}, Tokens: []string{api.TokenDigest("b")}}
	gone := api.Tenant{Name: "gone", Grants: reader.Grants}
	p.auth.publish(newAuthView([]api.Tenant{reader, boss, gone}, 9, time.Now()))
	for _, c := range []struct {
		name, header string
		want         api.Code
		tenant       string
		admin        bool
	}{
		{"none", "", api.CodeUnauthorized, "", false},
		{"empty bearer", "Bearer ", api.CodeUnauthorized, "", false},
		{"malformed", "Basic r", api.CodeUnauthorized, "", false},
		{"wrong", "Bearer nope", api.CodeUnauthorized, "", false},
		{"a tenant's", "Bearer r", "", "reader", false},
		{"an admin tenant's", "Bearer b", "", "boss", true},
		{"the proxy's own", "Bearer own", "", "", true},
	} {
		var rc fasthttp.RequestCtx
		if c.header != "" {
			rc.Request.Header.Set(api.HeaderAuth, c.header)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		who, err := p.authenticate(ctx, &rc)
		cancel()
		if api.CodeOf(err) != c.want || who.tenant != c.tenant || who.admin != c.admin {
			t.Errorf("%s: %+v %v, want %q tenant %q admin %v", c.name, who, err, c.want, c.tenant, c.admin)
		}
	}
	r := principal{tenant: "reader", t: reader}
	for _, c := range []struct {
		path string
		want api.Code
	}{{"/demo/a/cfg", ""}, {"/demo/a", ""}, {"/demo/b/cfg", api.CodeForbidden}, {"/demo", api.CodeForbidden}} {
		if err := need(r, api.RoleRead, c.path); api.CodeOf(err) != c.want {
			t.Errorf("reader reads %s: %v, want %q", c.path, err, c.want)
		}
	}
	if !p.tenantLive("reader") || p.tenantLive("gone") || p.tenantLive("deleted") || !p.tenantLive("") {
		t.Fatal("live tenants: a tenant without tokens (or gone) must not be")
	}
	if (&Proxy{}).authRequired() {
		t.Fatal("a proxy without a token runs a cluster without auth")
	}
	if routeLabel("/v1/made-up") != "other" || routeLabel(api.RoutePut) != api.RoutePut {
		t.Fatal("unknown routes are labelled other")
	}
}

// TestGrantNotExtendedWhileInvalidationUnacked (hole 5, the proxy's side):
// while an invalidation the proxy passed to a client is unacknowledged,
// its KeepAlives get no longer grant and its reads are not cacheable; the
// proxy's acknowledgement waits at most until the grant it had.
func TestGrantNotExtendedWhileInvalidationUnacked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, ps := sharedTable()
		first := keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance})
		if first.CacheMS <= 0 {
			t.Fatal("no grant")
		}
		tb.mu.Lock()
		granted := ps.grantUntil
		tb.cachers["/demo/x"] = map[uint64]struct{}{1: {}}
		ps.cached["/demo/x"] = struct{}{}
		tb.mu.Unlock()
		ch := tb.invalidate([]string{"/demo/x"}, false)
		// On the bubble's clock: a later KeepAlive would extend the grant.
		time.Sleep(20 * time.Millisecond)
		resp := keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance}) // no ack
		tb.mu.Lock()
		if ps.grantUntil.After(granted) || !ps.cacheBlocked() || len(resp.ProxyEvents) != 1 {
			t.Fatalf("grant extended to %v past %v (blocked %v) without the acknowledgement", ps.grantUntil, granted, ps.cacheBlocked())
		}
		tb.mu.Unlock()
		keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance, ProxyAck: resp.ProxyEvents[0].Seq})
		synctest.Wait()
		select {
		case <-ch:
		default:
			t.Fatal("the acknowledgement did not release the proxy's")
		}
		again := keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance, ProxyAck: resp.ProxyEvents[0].Seq})
		if again.CacheMS <= 0 || ps.cacheBlocked() {
			t.Fatal("an acknowledged client gets its grant again")
		}
	})
}
