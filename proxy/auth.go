package proxy

// Authentication of the requests the proxy answers itself (client
// KeepAlives, shared-cache reads, watch arming and re-arming, /v1/status),
// exactly as a lockd would: with tokens required (the proxy runs with a
// token of its own), a request needs a bearer token whose digest is in the
// proxy's view of the directory's tenants, and the tenant's role on each
// path. The view is re-read every api.ProxyAuthRefresh, so a revoked token
// or a narrowed grant takes effect here within that plus one directory
// read; a token the view lacks (made a moment ago) waits for the next read.
// Requests the proxy forwards carry the client's own credentials and the
// lockd decides.

import (
	"context"
	"crypto/subtle"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// principal is who sent a request the proxy answers itself.
type principal struct {
	tenant string // the directory tenant; "" for the proxy's own token or with auth off
	admin  bool
	t      api.Tenant
}

// allows reports whether p holds role on path.
func (p principal) allows(role api.Role, path string) bool {
	return p.admin || p.t.Allows(role, path)
}

// authView is the proxy's view of the tenants, by token digest.
type authView struct {
	byDigest map[string]api.Tenant
	live     map[string]bool // tenant name → it has a token
	watches  map[string]int  // tenant name → its effective watch quota
	read     time.Time       // when the directory read it comes from began
	index    uint64
}

func newAuthView(tenants []api.Tenant, index uint64, read time.Time) *authView {
	v := &authView{byDigest: map[string]api.Tenant{}, live: map[string]bool{}, watches: map[string]int{}, read: read, index: index}
	for _, t := range tenants {
		for _, d := range t.Tokens {
			v.byDigest[d] = t
		}
		v.live[t.Name] = len(t.Tokens) > 0
		v.watches[t.Name] = t.Quota.Effective().Watches
	}
	return v
}

// authState holds the current view and wakes those waiting for a newer one.
type authState struct {
	view  atomic.Pointer[authView]
	kick  chan struct{} // cap 1: a request waits for a fresher view
	mu    sync.Mutex
	newer chan struct{} // closed when the next read completes
}

func (a *authState) current() *authView { return a.view.Load() }

// publish installs v and wakes those waiting for a read.
func (a *authState) publish(v *authView) {
	a.view.Store(v)
	a.mu.Lock()
	if a.newer != nil {
		close(a.newer)
		a.newer = nil
	}
	a.mu.Unlock()
}

// awaitRead waits, up to ctx, for a view read that starts after now.
func (a *authState) awaitRead(ctx context.Context) *authView {
	start := time.Now()
	for i := 0; i < 4; i++ {
		a.mu.Lock()
		if a.newer == nil {
			a.newer = make(chan struct{})
		}
		ch := a.newer
		a.mu.Unlock()
		select {
		case a.kick <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return a.current()
		}
		if v := a.current(); v != nil && !v.read.Before(start) {
			return v
		}
	}
	return a.current()
}

// refreshTenants re-reads the directory every api.ProxyAuthRefresh (or
// sooner when a request waits for a token the view lacks, at most once per
// api.DirectoryRefreshGap), until the proxy stops. With auth off there
// is nothing to follow.
func (p *Proxy) refreshTenants() {
	for p.authRequired() && p.ctx.Err() == nil {
		wait := api.ProxyAuthRefresh
		if mutant.On(mutant.ProxyRevoke) {
			wait = time.Hour // the view is read only on demand
		}
		timer := time.NewTimer(wait)
		select {
		case <-p.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-p.auth.kick:
			timer.Stop()
		}
		p.readTenants()
		sleep(p.ctx, api.DirectoryRefreshGap)
	}
}

// readTenants reads the directory once and publishes its tenants.
func (p *Proxy) readTenants() {
	start := time.Now()
	ctx, cancel := context.WithTimeout(p.ctx, api.ProxyAuthRefresh+2*time.Second)
	err := p.up.RefreshDirectory(ctx)
	cancel()
	if err != nil {
		if p.ctx.Err() == nil { // a closing proxy's read is not a failure
			p.log.Warn("directory read for the tenants failed", "err", err)
		}
		return
	}
	d := p.up.Directory()
	if old := p.auth.current(); old != nil && old.index == d.Index && d.Index != 0 {
		nv := *old // nothing changed: the same view, read again now
		nv.read = start
		p.auth.publish(&nv)
		return
	}
	p.auth.publish(newAuthView(d.Tenants, d.Index, start))
}

// authRequired: the cluster requires tokens (the proxy has one).
func (p *Proxy) authRequired() bool { return p.cfg.Token != "" }

// authenticate finds the principal of a request the proxy answers itself,
// or refuses it unauthorized: no header, an empty or malformed one, a token
// no tenant holds (after a fresh read of the directory).
func (p *Proxy) authenticate(ctx context.Context, rc *fasthttp.RequestCtx) (principal, error) {
	if !p.authRequired() {
		return principal{admin: true}, nil
	}
	tok, err := api.BearerToken(string(rc.Request.Header.Peek(api.HeaderAuth)))
	if err != nil {
		return principal{}, api.Errorf(api.CodeUnauthorized, "%v", err)
	}
	return p.authenticateToken(ctx, tok)
}

// authenticateToken finds the principal holding tok (with auth off,
// anyone is): what authenticate does once it has the bearer token, and
// what the etcd gateway asks of an etcd auth token (proxy_etcd.go).
func (p *Proxy) authenticateToken(ctx context.Context, tok string) (principal, error) {
	if !p.authRequired() {
		return principal{admin: true}, nil
	}
	if tok == "" {
		return principal{}, api.Errorf(api.CodeUnauthorized, "this cluster requires an API token (Authorization: Bearer <token>)")
	}
	digest := api.TokenDigest(tok)
	if subtle.ConstantTimeCompare([]byte(digest), []byte(p.ownDigest)) == 1 {
		return principal{admin: true}, nil
	}
	v := p.auth.current()
	t, ok := lookup(v, digest)
	if !ok {
		wctx, cancel := context.WithTimeout(ctx, api.ProxyAuthRefresh+2*time.Second)
		v = p.auth.awaitRead(wctx)
		cancel()
		if t, ok = lookup(v, digest); !ok {
			return principal{}, api.Errorf(api.CodeUnauthorized, "unknown or revoked API token")
		}
	}
	return principal{tenant: t.Name, admin: t.IsAdmin(), t: t}, nil
}

func lookup(v *authView, digest string) (api.Tenant, bool) {
	if v == nil {
		return api.Tenant{}, false
	}
	t, ok := v.byDigest[digest]
	return t, ok
}

// viewFresh reports whether the proxy's view of the tenants was read
// within api.ProxyAuthMaxStale (with auth off, always): only then does it
// answer cached reads and watches itself.
func (p *Proxy) viewFresh() bool {
	if !p.authRequired() || mutant.On(mutant.ProxyRevoke) {
		return true
	}
	v := p.auth.current()
	return v != nil && time.Since(v.read) <= api.ProxyAuthMaxStale
}

// tenantLive reports whether a tenant a session belongs to still holds a
// token ("" is the proxy's own, or auth off: always).
func (p *Proxy) tenantLive(name string) bool {
	if name == "" || !p.authRequired() {
		return true
	}
	v := p.auth.current()
	return v == nil || v.live[name]
}

// tenantWatchQuota is a tenant's effective watch quota as the proxy's
// view of the directory has it (0: unknown tenant, or auth off).
func (p *Proxy) tenantWatchQuota(name string) int {
	if name == "" || !p.authRequired() {
		return 0
	}
	if v := p.auth.current(); v != nil {
		return v.watches[name]
	}
	return 0
}

// need refuses p unless it holds role on every path.
func need(p principal, role api.Role, paths ...string) error {
	for _, path := range paths {
		if !p.allows(role, path) && !mutant.On(mutant.ProxyACL) {
			return api.Errorf(api.CodeForbidden, "tenant %s has no %s role on %s", p.tenant, role, path)
		}
	}
	return nil
}
