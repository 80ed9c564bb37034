package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// readerTenant holds token "r", with the read role on /demo.
var readerTenant = api.Tenant{Name: "reader", Grants: []api.Grant{{Prefix: "/demo", Roles: []api.Role{api.RoleRead}}}, Tokens: []string{api.TokenDigest("r")}}

// TestStaleTenantViewForwardsSharedReads: the proxy answers a client's
// cached read from its shared cache only while its view of the tenants
// was read within api.ProxyAuthMaxStale. A proxy that cannot read the
// directory (a partition) cannot learn that a token was revoked since,
// so past that age it forwards the read, token and all, and the lockds
// (which know) decide; it never serves the token from its cache. mutant
// lockproxy_broken_revoke answers from a view of any age.
func TestStaleTenantViewForwardsSharedReads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		age   time.Duration // of the view when the read comes
		fresh bool
	}{
		{"read now", 0, true},
		{"as old as allowed", api.ProxyAuthMaxStale, true},
		{"older", api.ProxyAuthMaxStale + time.Millisecond, false},
		{"a minute old", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &Proxy{cfg: Config{Token: "own"}, ownDigest: api.TokenDigest("own"), ctx: context.Background()}
				p.auth.kick = make(chan struct{}, 1)
				p.auth.publish(newAuthView([]api.Tenant{readerTenant}, 9, time.Now()))
				time.Sleep(tc.age)
				tb, ps := sharedTable()
				ps.secret = strings.Repeat("ab", api.SessionSecretLen/2)
				p.cells = map[string]*cellTable{"demo": tb}
				if !tb.isLiveClient(1, ps.secret) {
					t.Fatal("the client is not the proxy's: its reads would be forwarded anyway")
				}
				if got := p.viewFresh(); got != tc.fresh {
					t.Fatalf("view %v old: fresh %v, want %v", tc.age, got, tc.fresh)
				}
				if tc.fresh {
					return // answered from the shared cache (proxy TestClientSecretAtTheProxy and others)
				}
				var rc fasthttp.RequestCtx
				rc.Request.Header.Set(api.HeaderAuth, "Bearer r")
				body, err := json.Marshal(api.ReadRequest{Path: "/demo/x", Session: 1, Secret: ps.secret, Cache: true, CacheWindowMS: 1000})
				if err != nil {
					t.Fatal(err)
				}
				rc.Request.SetBody(body)
				if p.serveShared(&rc, "demo", api.RouteGet) {
					t.Fatalf("a cached read answered by the proxy from a tenant view %v old (status %d %s); want it forwarded",
						tc.age, rc.Response.StatusCode(), rc.Response.Body())
				}
			})
		})
	}
}

// TestRevokedTokenRefusedAtTheNextRead: the proxy re-reads the
// directory's tenants every api.ProxyAuthRefresh, not only for tokens
// its view lacks, so a token it knows that the directory has revoked is
// refused at its next read. Here the proxy's view holds the reader's
// token and the fake cell's directory has no tenants: its next read,
// with no request asking for one, revokes the token. mutant
// lockproxy_broken_revoke reads the view only for an unknown token: the
// revoked one stays.
func TestRevokedTokenRefusedAtTheNextRead(t *testing.T) {
	_, p := startOnFake(t, Config{Token: "own"})
	p.auth.publish(newAuthView([]api.Tenant{readerTenant}, p.up.Directory().Index+1, time.Now()))
	// The next read's publish closes newer (no request kicks a read: the
	// reader's token is in the view).
	p.auth.mu.Lock()
	next := make(chan struct{})
	p.auth.newer = next
	p.auth.mu.Unlock()
	select {
	case <-next:
	case <-time.After(10 * api.ProxyAuthRefresh):
		t.Fatalf("no read of the tenants in %v while the view knows every token in use (one every %v expected)", 10*api.ProxyAuthRefresh, api.ProxyAuthRefresh)
	}
	authenticate := func() error {
		var rc fasthttp.RequestCtx
		rc.Request.Header.Set(api.HeaderAuth, "Bearer r")
		ctx, cancel := context.WithTimeout(context.Background(), 10*api.ProxyAuthRefresh)
		defer cancel()
		_, err := p.authenticate(ctx, &rc)
		return err
	}
	if err := authenticate(); api.CodeOf(err) != api.CodeUnauthorized {
		t.Fatalf("a token the directory no longer has, after the proxy's next read: %v, want unauthorized", err)
	}
}
