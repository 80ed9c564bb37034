package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/server/dirfsm"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/audit"
	"github.com/lockservice/lockd/server/cell"
)

// principal is who sent a request: a tenant (by its token), the bootstrap
// admin (the lockd's --admin-token), or anyone at all with auth off.
type principal struct {
	name   string // tenant name; "" with auth off
	tenant api.Tenant
	admin  bool
	quota  *api.Quota // the tenant's effective quota; nil: none
	// tokenID names the request's token in the audit log (a prefix of
	// its digest); "" with auth off.
	tokenID string
}

// allows reports whether p holds role on path.
func (p principal) allows(role api.Role, path string) bool {
	return p.admin || p.tenant.Allows(role, path) || mutant.On(mutant.ACL)
}

// caller is what the cell puts in the entries p's request makes.
func (p principal) caller() cell.Caller {
	return cell.Caller{Tenant: p.name, Quota: p.quota, Admin: p.admin}
}

// callerOn is caller for a write of path under role: the nodes it may
// create (make_parents) stay within the grant that allows it.
func (p principal) callerOn(role api.Role, path string) cell.Caller {
	who := p.caller()
	if !p.admin {
		who.ParentsFrom, _ = p.tenant.GrantRoot(role, path)
	}
	return who
}

// EnableAuth makes every request but /healthz and /metrics carry a token:
// adminToken (the cluster's bootstrap admin) or a tenant's.
func (s *Server) EnableAuth(adminToken string) {
	s.adminDigest = api.TokenDigest(adminToken)
	s.auth = true
}

// authenticate finds the request's principal, or refuses it unauthorized.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx) (principal, error) {
	if !s.auth {
		return principal{admin: true}, nil
	}
	tok, err := api.BearerToken(string(ctx.Request.Header.Peek(api.HeaderAuth)))
	if err != nil {
		return principal{}, api.Errorf(api.CodeUnauthorized, "%v", err)
	}
	if tok == "" {
		return principal{}, api.Errorf(api.CodeUnauthorized, "this cluster requires an API token (Authorization: Bearer <token>; lockctl --auth-token)")
	}
	digest := api.TokenDigest(tok)
	if subtle.ConstantTimeCompare([]byte(digest), []byte(s.adminDigest)) == 1 {
		return principal{name: api.BootstrapAdmin, admin: true, tokenID: digest[:audit.TokenIDLen]}, nil
	}
	t, ok := s.host.Directory().TenantByToken(tok)
	if !ok {
		// A token made a moment ago on another lockd: read the directory.
		if !s.refreshFor(func() bool { t, ok = s.host.Directory().TenantByToken(tok); return ok }) {
			return principal{}, api.Errorf(api.CodeUnauthorized, "unknown or revoked API token")
		}
	}
	q := t.Quota.Effective()
	return principal{name: t.Name, tenant: t, admin: t.IsAdmin(), quota: &q, tokenID: digest[:audit.TokenIDLen]}, nil
}

// renewCheck decides whose sessions p may have renewed: a tenant only its
// own; an admin (a lockproxy's batch) any. Either way only while the
// session's tenant holds a token in this lockd's view of the directory:
// once its tokens are revoked or it is deleted, its sessions run out
// within a lease, whatever a proxy still sends.
func (s *Server) renewCheck(p principal) cell.RenewCheck {
	if !s.auth {
		return nil
	}
	return func(tenant string) error {
		if !p.admin && tenant != p.name {
			return api.Errorf(api.CodeForbidden, "the session belongs to tenant %s, not to %s", tenant, p.name)
		}
		if tenant == "" || tenant == api.BootstrapAdmin || mutant.On(mutant.RenewCheck) {
			return nil
		}
		if t, ok := s.host.Directory().Tenant(tenant); !ok || len(t.Tokens) == 0 {
			return api.Errorf(api.CodeUnauthorized, "tenant %s holds no API token: its sessions are not renewed", tenant)
		}
		return nil
	}
}

// need refuses p unless it holds role on path.
func need(p principal, role api.Role, path string) error {
	if p.allows(role, path) {
		return nil
	}
	return api.Errorf(api.CodeForbidden, "tenant %s has no %s role on %s", p.name, role, path)
}

// needAdmin refuses p unless it is an admin of the cluster.
func needAdmin(p principal) error {
	if p.admin {
		return nil
	}
	return api.Errorf(api.CodeForbidden, "tenant %s is not an admin: cluster operations need the admin role on /", p.name)
}

// writeLimiter holds each tenant to its writes per second on this lockd
// (a token bucket per tenant, refilled continuously, as deep as a second;
// refusals draw on it too, so a flood is paced to the quota).
type writeLimiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// allow takes one write from tenant's bucket, or reports it empty and
// how long until it holds one again.
func (l *writeLimiter) allow(tenant string, perSec int, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(tenant, perSec, now)
	if b.tokens < 1 {
		// A refusal costs a token too (down to a second's worth owed):
		// a tenant hammering past its quota pushes its next write back,
		// so retrying at once does not multiply the refusals.
		b.tokens = max(b.tokens-1, -float64(perSec))
		return false, time.Duration((1 - b.tokens) / float64(perSec) * float64(time.Second))
	}
	b.tokens--
	return true, 0
}

// refillLocked returns tenant's bucket, refilled up to now.
func (l *writeLimiter) refillLocked(tenant string, perSec int, now time.Time) *bucket {
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[tenant]
	if b == nil {
		b = &bucket{tokens: float64(perSec), last: now}
		l.buckets[tenant] = b
	}
	b.tokens = min(float64(perSec), b.tokens+now.Sub(b.last).Seconds()*float64(perSec))
	b.last = now
	return b
}

// take takes one write from tenant's bucket if it holds one; unlike
// allow, an empty bucket costs nothing (a cache grant the tenant did not
// ask for is simply not made).
func (l *writeLimiter) take(tenant string, perSec int, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refillLocked(tenant, perSec, now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// limitWrites refuses a write past p's writes per second. The refusal
// is answered only when the tenant's bucket would take a write again (at
// most a second later): a client that retries at once is paced to its
// quota instead of costing the lockd a refusal per round trip.
func (s *Server) limitWrites(p principal) error {
	if p.quota == nil || p.admin {
		return nil
	}
	if ok, wait := s.writes.allow(p.name, p.quota.WritesPerSec, time.Now()); !ok {
		time.Sleep(min(wait, time.Second))
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s is over its %d writes/s on this lockd", p.name, p.quota.WritesPerSec)
	}
	return nil
}

// grantCheck meters a read's cache grant (a committed entry) by p's
// writes per second: past it the read is served uncached, not refused.
func (s *Server) grantCheck(p principal) cell.GrantCheck {
	if p.quota == nil || p.admin || mutant.On(mutant.FreeGrants) {
		return nil
	}
	return func() bool { return s.writes.take(p.name, p.quota.WritesPerSec, time.Now()) }
}

// newToken makes an API token: 256 random bits.
func newToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("httpapi: no randomness for a token: " + err.Error())
	}
	return "lkd_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// tenant creates, changes or deletes a tenant (admin only). A new token
// is made here and returned once; only its digest is committed.
func (s *Server) tenant(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.TenantRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := api.CheckNewName(req.Tenant.Name); err != nil && req.Action == api.TenantPut {
		return nil, err
	}
	change := &dirfsm.TenantChange{TenantRequest: req}
	change.Tenant.Tokens = nil // digests are the service's to make
	var token string
	if req.NewToken && req.Action == api.TenantPut {
		token = newToken()
		change.TokenDigest = api.TokenDigest(token)
	}
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	res, err := s.host.ProposeDirectory(cctx, &dirfsm.Command{Op: dirfsm.OpTenant, Tenant: change})
	if err != nil {
		return nil, err
	}
	s.log.Info("tenant changed", "tenant", req.Tenant.Name, "action", req.Action, "new_token", token != "", "by", p.name, "index", res.Index)
	out := api.TenantResponse{Token: token, Index: res.Index}
	if res.Tenant != nil {
		out.Tenant = *res.Tenant
		out.Tenant.Tokens = nil
	}
	return out, nil
}

// tenants lists the tenants (admin only), without their token digests.
func (s *Server) tenants(p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	d, err := s.host.ReadDirectory(cctx)
	if err != nil {
		return nil, err
	}
	out := api.TenantsResponse{Auth: s.auth, Tenants: []api.TenantInfo{}}
	for _, t := range d.Tenants {
		out.Tenants = append(out.Tenants, api.TenantInfo{Name: t.Name, Grants: t.Grants, Quota: t.Quota.Effective(), Tokens: len(t.Tokens)})
	}
	return out, nil
}

// refusalLogBurst is how many refusals of one code a lockd logs a second.
const refusalLogBurst = 20

// logLimiter lets through refusalLogBurst lines a second per key and
// counts the rest, reported with the next line let through.
type logLimiter struct {
	mu      sync.Mutex
	windows map[string]*logWindow
}

type logWindow struct {
	start          time.Time
	logged, missed int
}

func (l *logLimiter) allow(key string, now time.Time) (ok bool, missedBefore int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.windows == nil {
		l.windows = map[string]*logWindow{}
	}
	w := l.windows[key]
	if w == nil || now.Sub(w.start) >= time.Second {
		missed := 0
		if w != nil {
			missed = w.missed
		}
		l.windows[key] = &logWindow{start: now, logged: 1}
		return true, missed
	}
	if w.logged < refusalLogBurst {
		w.logged++
		missed := w.missed
		w.missed = 0
		return true, missed
	}
	w.missed++
	return false, 0
}
