// Package proxy is lockproxy: it terminates client connections (thousands
// per proxy), forwards each request to the leader of the right cell, and
// renews all its clients' sessions on a cell with one batched KeepAlive
// per second. Sessions belong to the cell, not the proxy: a client whose
// proxy dies goes on through another with the same session.
package proxy

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/connpark"
	"github.com/lockservice/lockd/internal/httpbody"
	"github.com/lockservice/lockd/internal/listen"
	"github.com/lockservice/lockd/internal/tlsutil"
	"github.com/lockservice/lockd/proxy/etcdgw"
	"github.com/lockservice/lockd/sdk"
)

// Version is the build's version, set by the linker.
var Version = "dev"

// Config configures a proxy.
type Config struct {
	// Name is the proxy's name in the directory (a-z, 0-9, -, _).
	Name string
	// Listen is the client API address; Advertise the address registered
	// in the directory (Listen when empty).
	Listen, Advertise string
	Zone              string
	// Lockds are API addresses of lockd processes to learn the directory from.
	Lockds []string
	// Token is the proxy's own API token (an admin's: the proxy renews
	// every client's session and holds watches for them), when the
	// cluster requires tokens. It then serves a client's read from its
	// shared cache only if the client's own token may read the path.
	Token string
	// TLS is the client listener's configuration (mutual: clients present
	// certificates the cluster's CA signed); UpstreamTLS the proxy's own
	// client configuration toward the lockds. Both nil: plain HTTP.
	TLS, UpstreamTLS *tls.Config
	// MaxConns bounds the client connections served at once (0:
	// api.MaxConnectionsPerProxy; only tests set it lower).
	MaxConns int
	// ParkKeepAlives holds clients' KeepAlives without a goroutine
	// (park.go): a held one costs its connection's few KB instead of a
	// worker's stack, buffers and request context (about half the RSS
	// at 10 000 sessions), for more CPU per KeepAlive (bench/RESULTS.md,
	// "A lockproxy's held KeepAlives").
	ParkKeepAlives bool
	// EtcdListen, when set, serves etcd's v3 gRPC API there (proxy/etcdgw,
	// docs/etcd.md), with the client listener's TLS; EtcdDefaultPrefix
	// holds the etcd keys without a leading "/"; EtcdLockDelay is the
	// lock-delay of locks taken through etcd's Lock service.
	EtcdListen        string
	EtcdAdvertise     string // the etcd address given to clients and peers (EtcdListen's when empty)
	EtcdDefaultPrefix string
	EtcdLockDelay     time.Duration
	Logger            *slog.Logger
}

// Proxy is one running lockproxy.
type Proxy struct {
	cfg Config
	log *slog.Logger
	up  *sdk.Client
	m   *metrics
	reg *prometheus.Registry
	// metrics serves reg on /metrics.
	metrics fasthttp.RequestHandler

	// instance names this run of the proxy to its clients: one that
	// restarts holds none of the old run's cache grants and watches.
	instance string

	mu    sync.Mutex
	cells map[string]*cellTable

	// auth is the proxy's view of the tenants (auth.go); ownDigest its
	// own token's digest; quota its clients' watches per tenant.
	auth      authState
	ownDigest string
	quota     *watchQuota

	// etcd is the etcd gateway (nil without EtcdListen) and etcdBackend
	// its way in (proxy_etcd.go).
	etcd        *etcdgw.Gateway
	etcdBackend *etcdBackend
	etcdURL     atomic.Pointer[string] // set once the gateway serves (ProxyStatus.EtcdURL); read by Status while serving

	srv *fasthttp.Server
	ln  net.Listener
	// limited bounds the client connections open (served, or parked
	// idle by conns, which fasthttp's Concurrency does not count).
	limited *listen.Limited
	// closeGrace bounds how long Close waits for its clients' requests
	// (closeGraceDefault unless a test sets it).
	closeGrace time.Duration
	// conns holds client connections idle between two requests without
	// a goroutine or buffers (internal/connpark).
	conns  connpark.Conns
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// ErrLockdsUnreachable is Start's error when no lockd served the directory
// in time: worth retrying, as lockds may start after their proxies.
var ErrLockdsUnreachable = errors.New("reach the lockds")

// Start connects to the lockds, starts serving clients and registers the
// proxy in the directory.
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.Listen
	}
	// up forwards the clients' requests, and its sessions (one per cell)
	// are the proxy's own: their caches are the shared cache, and the
	// gate holds back their acknowledgements for the proxy's clients.
	g := &gate{}
	up, err := sdk.New(ctx, sdk.Config{Endpoints: cfg.Lockds, Direct: true, Logger: cfg.Logger, Gate: g, AuthToken: cfg.Token, TLS: cfg.UpstreamTLS})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLockdsUnreachable, err)
	}
	raw, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = up.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	// Out of file descriptors, the proxy waits for one instead of ending.
	var ln net.Listener = listen.Retrying(raw)
	p := newProxy(cfg, up, g, ln)
	p.srv = p.server()
	// Every open client connection counts, served or parked idle.
	p.limited = listen.Limit(ln, p.maxConns(), cfg.TLS == nil)
	ln = p.limited
	if mutant.On(mutant.ProxyParkUncounted) {
		ln = p.ln
	}
	p.conns.Serve(p.srv.ServeConn)
	if err := p.conns.ParkIdle(p.srv.IdleTimeout, p.maxConns()); err != nil {
		p.log.Info("idle client connections stay with fasthttp", "err", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	p.serve(ln)
	if err := p.startEtcd(ctx); err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("etcd gateway: %w", err)
	}
	return p, nil
}

// newProxy is the proxy on up (whose gate is g) and ln, with its tenants
// as up's directory has them and its metrics.
func newProxy(cfg Config, up *sdk.Client, g *gate, ln net.Listener) *Proxy {
	p := &Proxy{cfg: cfg, log: cfg.Logger, up: up, cells: map[string]*cellTable{}, ln: ln, reg: prometheus.NewRegistry(),
		instance: cfg.Name + "/" + rand.Text()[:10], quota: &watchQuota{per: map[string]int{}}}
	g.p = p
	p.quota.quotaOf = p.tenantWatchQuota
	p.auth.kick = make(chan struct{}, 1)
	if cfg.Token != "" {
		p.ownDigest = api.TokenDigest(cfg.Token)
	}
	d := up.Directory()
	p.auth.publish(newAuthView(d.Tenants, d.Index, time.Now()))
	p.m = newMetrics(p.reg, p)
	p.metrics = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}))
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// server is the proxy's fasthttp server.
func (p *Proxy) server() *fasthttp.Server {
	return &fasthttp.Server{
		Handler: p.handle,
		Name:    "lockproxy",
		// Bodies stream: none is read before the client is known (its
		// certificate and token), and then only up to MaxRequestBody.
		MaxRequestBodySize: api.MaxRequestBody,
		StreamRequestBody:  true,
		// No route takes a form: fasthttp would otherwise read a
		// multipart body (to temporary files) before the handler.
		DisablePreParseMultipartForm: true,
		// An idle client connection gives its write buffer and body
		// buffers back between requests (as a lockd's: 11.7 KB, not
		// 15.9 KB; bench/RESULTS.md, Memory).
		ReduceMemoryUsage: true,
		ReadTimeout:       api.MaxKeepAliveWait + 10*time.Second,
		WriteTimeout:      api.MaxKeepAliveWait + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		CloseOnShutdown:   true,
		// The bound is the listener's (p.limited), which counts a parked
		// connection too. fasthttp's counts the connections it serves,
		// one twice for a moment as it is handed back (its old worker not
		// yet done): at the listener's bound it would refuse one the
		// listener admitted.
		Concurrency: concurrencyFor(p.maxConns()),
		// A client connection idle between two requests is held by
		// p.conns and served again once its client speaks.
		KeepHijackedConns: true,
	}
}

// openClients is how many client connections are open (served or
// parked idle).
func (p *Proxy) openClients() int {
	if p.limited == nil {
		return 0
	}
	return p.limited.Open()
}

// concurrencyFor is fasthttp's bound on the connections it serves at once
// for a listener that admits max: twice it, so that a connection counted
// twice while it is handed back is never refused.
func concurrencyFor(max int) int { return 2 * max }

// maxConns bounds the client connections open at once.
func (p *Proxy) maxConns() int { return cmp.Or(p.cfg.MaxConns, api.MaxConnectionsPerProxy) }

// serve starts the proxy's loops: the tenants' refresh, serving clients
// on ln, and the registration in the directory.
func (p *Proxy) serve(ln net.Listener) {
	p.wg.Add(3)
	go func() {
		defer p.wg.Done()
		p.refreshTenants()
	}()
	go func() {
		defer p.wg.Done()
		if err := p.srv.Serve(ln); err != nil {
			p.log.Error("serve", "err", err)
		}
	}()
	go func() {
		defer p.wg.Done()
		p.register()
	}()
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops serving; the sessions live on in their cells and their
// clients go on through another proxy.
func (p *Proxy) Close() error {
	eerr := p.closeEtcd()
	p.cancel()
	p.conns.Close() // parked and idle client connections: their clients reconnect
	for _, t := range p.tables() {
		t.endHolds() // the held KeepAlives: answered on connections closed
	}
	err := p.shutdown()
	p.conns.CloseServing()
	// Shutdown closes only the listeners Serve has taken: a proxy closed
	// before its Serve began would wait for it for ever.
	_ = p.ln.Close()
	p.wg.Wait()
	return errors.Join(eerr, err, p.up.Close())
}

// closeGraceDefault bounds how long a proxy's Close waits for the requests
// in flight (its held KeepAlives are answered first, so these are short
// calls forwarded to a cell), as a lockd's shutdown does.
const closeGraceDefault = 3 * time.Second

// shutdown stops the fasthttp server: it waits at most the close grace
// for the connections it serves, then closes every client connection
// still open (a client silent since its answer, a TLS client that never
// sent its ClientHello), whose clients go on through another proxy.
func (p *Proxy) shutdown() error {
	if mutant.On(mutant.ProxyCloseUnbounded) {
		return p.srv.Shutdown()
	}
	grace := cmp.Or(p.closeGrace, closeGraceDefault)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	err := p.srv.ShutdownWithContext(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	n := p.limited.CloseAll()
	p.log.Warn("client connections still open after the close grace; closed", "grace", grace, "closed", n)
	return nil // fasthttp's goroutines end as their connections' reads fail
}

// register records the proxy in the directory, retrying until it is.
func (p *Proxy) register() {
	info := api.ProxyInfo{Name: p.cfg.Name, APIAddr: p.cfg.Advertise, Zone: p.cfg.Zone}
	for p.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		err := p.up.RegisterProxy(ctx, info)
		cancel()
		if err == nil {
			p.log.Info("registered in the directory", "name", info.Name, "addr", info.APIAddr)
			return
		}
		if p.ctx.Err() != nil {
			return // the proxy is closing: not a failure to report
		}
		p.log.Warn("proxy registration failed; retrying", "err", err)
		sleep(p.ctx, time.Second)
	}
}

// table returns the cell's session table, starting its batch loops.
func (p *Proxy) table(cell string) (*cellTable, error) {
	p.mu.Lock()
	t := p.cells[cell]
	p.mu.Unlock()
	if t != nil {
		return t, nil
	}
	// Outside the lock: it may read the directory again.
	if !p.knowsCell(cell) {
		return nil, api.Errorf(api.CodeWrongCell, "no cell named %q in the directory", cell)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.cells[cell]; t != nil {
		return t, nil
	}
	t = newCellTable(p.ctx, cell, p.cfg.Name, p.instance, p.up, p.m)
	t.live, t.quota, t.log = p.tenantLive, p.quota, p.log
	p.cells[cell] = t
	p.wg.Add(2)
	go func() { defer p.wg.Done(); t.run(p.ctx) }()
	go func() { defer p.wg.Done(); t.runUrgent(p.ctx) }()
	return t, nil
}

// knowsCell reports whether the directory names cell: a cell the
// proxy's view lacks (one created a moment ago) is looked up again in a
// directory read (the SDK's, shared by every such request and bounded by
// api.UnknownCellWait) before the request is refused wrong_cell.
func (p *Proxy) knowsCell(cell string) bool {
	return p.up.KnowsCell(p.ctx, cell)
}

func (p *Proxy) tables() []*cellTable {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*cellTable, 0, len(p.cells))
	for _, t := range p.cells {
		out = append(out, t)
	}
	return out
}

// etcdURLNow is the etcd gateway's URL ("" before it serves, or without one).
func (p *Proxy) etcdURLNow() string {
	if u := p.etcdURL.Load(); u != nil {
		return *u
	}
	return ""
}

// Status is the proxy's status.
func (p *Proxy) Status() api.ProxyStatus {
	st := api.ProxyStatus{Proxy: api.ProxyInfo{Name: p.cfg.Name, APIAddr: p.cfg.Advertise, Zone: p.cfg.Zone}, Version: Version, Clients: p.openClients(),
		EtcdURL: p.etcdURLNow()}
	now := time.Now()
	for _, t := range p.tables() {
		cs := t.status(now)
		st.Sessions += cs.Sessions
		st.Cells = append(st.Cells, cs)
	}
	return st
}

// handle serves one client request, step by step: the routes that take no
// client (health, metrics), the client's check (its certificate, then its
// body, read once the client is known), the proxy's own routes, the
// KeepAlives, and the rest forwarded to the cell's leader.
func (p *Proxy) handle(ctx *fasthttp.RequestCtx) {
	p.handleFrom(ctx, true)
	p.conns.ParkIfIdle(ctx)
}

// handleInternal serves the etcd gateway's requests (proxy_etcd.go): the
// gRPC server checked the client's certificate, so only that check is
// skipped; the token's is not. Served in process, with no connection,
// none is parked.
func (p *Proxy) handleInternal(ctx *fasthttp.RequestCtx) { p.handleFrom(ctx, false) }

// handleFrom serves a request; onConn: fasthttp serves it on a client's
// connection (its certificate is checked, and its held KeepAlive may be
// parked), not in process.
func (p *Proxy) handleFrom(ctx *fasthttp.RequestCtx, onConn bool) {
	route := string(ctx.Path())
	if p.serveUnchecked(ctx, route) {
		return
	}
	if !p.checkClient(ctx, onConn) {
		return
	}
	if p.serveLocal(ctx, route) {
		return
	}
	arrived := time.Now()
	p.m.requests.WithLabelValues(routeLabel(route)).Inc()
	if p.serveKeepAlive(ctx, route, arrived, onConn) {
		return
	}
	p.forwardToCell(ctx, route, arrived)
}

// serveUnchecked refuses the body of a request that takes none, unread,
// and answers the routes that take no client (health, metrics). It
// reports whether it answered.
func (p *Proxy) serveUnchecked(ctx *fasthttp.RequestCtx, route string) bool {
	if (!ctx.IsPost() || route == api.RouteHealth || route == api.RouteMetrics) && !mutant.On(mutant.ProxyBody) {
		// Only a POST to the API takes a body: any other's is refused unread.
		if err := httpbody.Read(ctx, 0); err != nil {
			reply(ctx, nil, err)
			return true
		}
	}
	switch route {
	case api.RouteHealth:
		ctx.SetBodyString("ok\n")
		return true
	case api.RouteMetrics:
		p.metrics(ctx)
		return true
	}
	return false
}

// checkClient refuses a client without the certificate mutual TLS needs,
// and reads a POST's body once its client is known (readClientBody). It
// reports whether the request goes on.
func (p *Proxy) checkClient(ctx *fasthttp.RequestCtx, checkCert bool) bool {
	if checkCert && p.cfg.TLS != nil && !tlsutil.HasClientCert(ctx.TLSConnectionState()) {
		ctx.SetConnectionClose() // its body, if any, is left unread
		reply(ctx, nil, api.Errorf(api.CodeUnauthorized, "this lockproxy requires a client certificate its CA signed (mutual TLS)"))
		return false
	}
	if ctx.IsPost() && !mutant.On(mutant.ProxyBody) {
		if err := p.readClientBody(ctx); err != nil {
			reply(ctx, nil, err)
			return false
		}
	}
	return true
}

// serveLocal answers the routes that no cell answers (status; the
// directory, the cluster's status and the tenants, from a lockd) and
// refuses any other request that is not a POST. It reports whether it
// answered.
func (p *Proxy) serveLocal(ctx *fasthttp.RequestCtx, route string) bool {
	switch route {
	case api.RouteStatus:
		p.serveStatus(ctx)
		return true
	case api.RouteDirectory, api.RouteStatusCluster, api.RouteStatusHealth, api.RouteAdminTenants:
		// A lockd answers, to the client's own credentials (the tenants
		// in the directory are for admins only).
		cctx, cancel := p.requestContext(ctx)
		defer cancel()
		body, err := p.up.Forward(cctx, "", route, nil, sdk.ForwardOptions{Method: "GET", RetryUnsure: true, Authorization: string(ctx.Request.Header.Peek(api.HeaderAuth)),
			ClientAddr: ctx.RemoteAddr().String()})
		replyRaw(ctx, body, err)
		return true
	}
	if !ctx.IsPost() {
		reply(ctx, nil, api.Errorf(api.CodeBadRequest, "%s takes POST", route))
		return true
	}
	return false
}

// serveKeepAlive answers a client's KeepAlive (the proxy renews its
// session; parkable: one held may be parked, park.go) and refuses a
// batch. It reports whether it answered.
func (p *Proxy) serveKeepAlive(ctx *fasthttp.RequestCtx, route string, arrived time.Time, parkable bool) bool {
	switch route {
	case api.RouteSessionKeepAlive:
		p.clientKeepAlive(ctx, arrived, parkable)
		return true
	case api.RouteKeepAliveBatch:
		who, err := p.authenticate(p.ctx, ctx)
		reply(ctx, nil, batchRefusal(who, err))
		return true
	}
	return false
}

// batchRefusal is why a client's batch is refused: as a lockd would refuse
// a non-admin, and to an admin because a proxy sends batches, it takes
// none. authErr is the client's authentication error, if any.
func batchRefusal(who principal, authErr error) error {
	switch {
	case authErr != nil:
		return authErr
	case !who.admin:
		return api.Errorf(api.CodeForbidden, "tenant %s is not an admin: batches are a lockproxy's", who.tenant)
	}
	return api.Errorf(api.CodeBadRequest, "a proxy takes its clients' KeepAlives, not batches")
}

// forwardToCell serves a request on a cell's node tree: from the shared
// cache or watch table if it can, else forwarded to the cell's leader (a
// session opened through it is recorded here).
func (p *Proxy) forwardToCell(ctx *fasthttp.RequestCtx, route string, arrived time.Time) {
	cell, err := p.cellOf(ctx)
	if err != nil {
		reply(ctx, nil, err)
		return
	}
	idx, err := api.ParseDirectoryIndex(ctx.Request.Header.Peek(api.HeaderDirectoryIndex))
	if err != nil {
		reply(ctx, nil, err)
		return
	}
	if route == api.RouteSessionClose {
		p.noteClose(ctx, cell)
	}
	if p.serveShared(ctx, cell, route) {
		return
	}
	cctx, cancel := p.requestContext(ctx)
	defer cancel()
	o := sdk.ForwardOptions{Authorization: string(ctx.Request.Header.Peek(api.HeaderAuth)), ClientAddr: ctx.RemoteAddr().String(), DirectoryIndex: idx,
		// A request its client would resend itself (a read, a write under
		// a session's request id) is resent here to another replica when
		// the leader hangs or fails, within the client's budget: the
		// client, holding its attempt on this live proxy, would otherwise
		// wait it out.
		RetryUnsure: string(ctx.Request.Header.Peek(api.HeaderResendable)) == "1" && !mutant.On(mutant.ProxyNoResend)}
	if route == api.RouteChanges { // a long poll: the lockd holds it up to MaxChangesWaitMS
		o.Timeout = sdk.DefaultRequestTimeout + api.MaxChangesWaitMS*time.Millisecond
		cctx, cancel = context.WithTimeout(p.ctx, o.Timeout)
		defer cancel()
	}
	cctx, tr := traceForward(cctx, ctx)
	body, err := p.up.Forward(cctx, cell, route, ctx.PostBody(), o)
	switch c := api.CodeOf(err); {
	case err == nil && route == api.RouteSessionOpen:
		p.opened(ctx, cell, body, arrived)
	case err != nil && (c == api.CodeUnavailable || c == api.CodeInternal || c == ""):
		p.log.Debug("forward failed", "route", route, "cell", cell, "err", err)
	}
	replyRaw(ctx, body, err)
	answerTrace(ctx, tr, arrived)
}

// readClientBody reads a POST's body once its client is known: with auth
// required, a request without a valid token is refused first, its body
// unread (a lockd would refuse it too), so a stranger cannot make the
// proxy hold api.MaxRequestBody per connection.
func (p *Proxy) readClientBody(ctx *fasthttp.RequestCtx) error {
	if p.authRequired() {
		if _, err := p.authenticate(p.ctx, ctx); err != nil {
			ctx.SetConnectionClose()
			return err
		}
	}
	return httpbody.Read(ctx, api.MaxRequestBody)
}

// serveStatus answers /v1/status: for admins only, as a lockd's (it
// lists the proxy's cells and sessions).
func (p *Proxy) serveStatus(ctx *fasthttp.RequestCtx) {
	who, err := p.authenticate(p.ctx, ctx)
	if err == nil && !who.admin {
		err = api.Errorf(api.CodeForbidden, "tenant %s is not an admin: the proxy's status is for admins", who.tenant)
	}
	if err != nil {
		reply(ctx, nil, err)
		return
	}
	reply(ctx, p.Status(), nil)
}

// admitKeepAlive checks a client's KeepAlive before its session's table
// holds it. It is bounded and authenticated here; a session new to this
// proxy gets an entry only once the leader accepted a KeepAlive of it
// (forwarded with the client's own credentials): a made-up session id or
// secret never reaches a batch.
func (p *Proxy) admitKeepAlive(rc *fasthttp.RequestCtx) (*cellTable, api.KeepAliveRequest, error) {
	var req api.KeepAliveRequest
	if err := decodeWire(rc, &req); err != nil {
		return nil, req, err
	}
	if err := checkKeepAlive(req); err != nil {
		return nil, req, err
	}
	who, err := p.authenticate(p.ctx, rc)
	if err != nil {
		return nil, req, err
	}
	t, err := p.table(req.Cell)
	if err != nil {
		idx, _ := api.ParseDirectoryIndex(rc.Request.Header.Peek(api.HeaderDirectoryIndex)) // malformed: as none
		if err = p.up.UnknownCellError(req.Cell, idx, err); err == nil {
			t, err = p.table(req.Cell) // listed by a read that landed meanwhile
		}
		if err != nil {
			return nil, req, err
		}
	}
	tenant, known := t.owner(req.Session)
	switch {
	case known && tenant != "" && tenant != who.tenant && !who.admin:
		return nil, req, api.Errorf(api.CodeForbidden, "session %d is tenant %s's", req.Session, tenant)
	case !known && mutant.On(mutant.BatchSplit):
		t.adopt(req.Session, req.Secret, who.tenant) // the claim rides unverified
	case !known:
		if err := p.confirmSession(rc, req); err != nil {
			return nil, req, err
		}
		t.adopt(req.Session, req.Secret, who.tenant)
	}
	return t, req, nil
}

// confirmSession asks the cell's leader, with the client's own
// credentials, whether the session lives and the secret is its own: a
// watch request arming nothing (a linearizable read on the leader, which
// checks the secret). It renews nothing and touches none of the
// session's events: the proxy's next batch renews it, as for any session.
func (p *Proxy) confirmSession(rc *fasthttp.RequestCtx, req api.KeepAliveRequest) error {
	body, err := json.Marshal(api.WatchRequest{Cell: req.Cell, Session: req.Session, Secret: req.Secret, Watches: []api.WatchSpec{}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(p.ctx, sdk.DefaultRequestTimeout)
	defer cancel()
	_, err = p.up.Forward(ctx, req.Cell, api.RouteWatch, body, sdk.ForwardOptions{RetryUnsure: true,
		Authorization: string(rc.Request.Header.Peek(api.HeaderAuth))})
	return err
}

// routeLabel is a request's route as a metric label: the route itself if
// the API has it, else one fixed label (a label per path a caller makes up
// would grow /metrics without bound).
func routeLabel(route string) string {
	if knownRoutes[route] {
		return route
	}
	return "other"
}

var knownRoutes = map[string]bool{
	api.RouteSessionOpen: true, api.RouteSessionKeepAlive: true, api.RouteSessionClose: true, api.RouteKeepAliveBatch: true,
	api.RouteCreate: true, api.RoutePut: true, api.RouteDelete: true, api.RouteGet: true, api.RouteChildren: true,
	api.RouteTxn: true, api.RouteLockMode: true, api.RouteRange: true, api.RouteRanges: true, api.RouteChanges: true,
	api.RouteLockState: true, api.RouteLockQueue: true, api.RouteLockCheck: true, api.RouteWatch: true,
	api.RouteAdminSnapshot: true, api.RouteAdminBackup: true, api.RouteAdminCellCreate: true, api.RouteAdminPrefixAssign: true,
	api.RouteAdminRegister: true, api.RouteAdminMigrate: true, api.RouteAdminMember: true, api.RouteAdminRestore: true,
	api.RouteAdminTenant: true, api.RouteAdminProxyRegister: true, api.RouteAdminTransfer: true, api.RouteAdminPrefixOp: true,
	api.RouteAdminTenantCommit: true, api.RouteAdminMemberRecord: true, api.RouteAdminTenants: true, api.RouteStatusCluster: true, api.RouteStatusHealth: true,
}

// opened notes a session opened through the proxy, as its client's
// tenant's.
func (p *Proxy) opened(rc *fasthttp.RequestCtx, cell string, body []byte, arrived time.Time) {
	var resp api.SessionResponse
	if json.Unmarshal(body, &resp) != nil || resp.Session == 0 {
		return
	}
	who, err := p.authenticate(p.ctx, rc)
	if err != nil {
		return // the cell took a token the proxy does not know: its KeepAlives will tell
	}
	if t, err := p.table(cell); err == nil {
		t.opened(resp.Session, resp.Secret, time.Duration(resp.LeaseMS)*time.Millisecond, arrived, who.tenant)
	}
}

// cellOf is the cell a request goes to: the client's Lockd-Cell header
// (the SDK always sends it), else the request's cell field, else its
// path's prefix by the directory; "" for directory administration.
func (p *Proxy) cellOf(ctx *fasthttp.RequestCtx) (string, error) {
	if c := string(ctx.Request.Header.Peek(api.HeaderCell)); c != "" {
		return c, nil
	}
	var probe struct {
		Cell string `json:"cell"`
		Path string `json:"path"`
		// Root: a range's or a change read's (api/range_types.go).
		Root string `json:"root"`
		// Then: a transaction's writes; its first one's path routes it.
		Then []struct {
			Path string `json:"path"`
		} `json:"then"`
	}
	if err := decode(ctx, &probe); err != nil {
		return "", err
	}
	switch {
	case probe.Cell != "":
		return probe.Cell, nil
	case probe.Path != "":
		return p.up.CellFor(probe.Path)
	case probe.Root != "":
		return p.up.CellFor(probe.Root)
	case len(probe.Then) > 0 && probe.Then[0].Path != "":
		return p.up.CellFor(probe.Then[0].Path)
	}
	return "", nil
}

// noteClose forgets a session its client is closing (before the close is
// forwarded: a batch must not renew it meanwhile).
func (p *Proxy) noteClose(ctx *fasthttp.RequestCtx, cell string) {
	var req api.CloseSessionRequest
	if decode(ctx, &req) == nil && req.Session != 0 {
		p.mu.Lock()
		t := p.cells[cell]
		p.mu.Unlock()
		if t != nil {
			t.closed(req.Session, req.Secret)
		}
	}
}

// requestContext bounds a forwarded request by what its client waits:
// the SDK's Lockd-Wait-Leader-Ms is half its attempt budget.
func (p *Proxy) requestContext(ctx *fasthttp.RequestCtx) (context.Context, context.CancelFunc) {
	budget := sdk.DefaultRequestTimeout
	if n, err := strconv.ParseInt(string(ctx.Request.Header.Peek(api.HeaderWaitLeaderMS)), 10, 64); err == nil && n > 0 {
		// As a lockd holds a request at most MaxLeaderWait, whatever
		// the header says.
		budget = 2 * min(time.Duration(n)*time.Millisecond, api.MaxLeaderWait)
	}
	return context.WithTimeout(p.ctx, budget)
}

func decode(ctx *fasthttp.RequestCtx, v any) error {
	if err := json.Unmarshal(ctx.PostBody(), v); err != nil {
		return api.Errorf(api.CodeBadRequest, "malformed JSON body: %v", err)
	}
	return nil
}

func reply(ctx *fasthttp.RequestCtx, v any, err error) { replyTo(&ctx.Response, v, err) }

// replyTo writes reply's answer into r.
func replyTo(r *fasthttp.Response, v any, err error) {
	if err != nil {
		replyRawTo(r, nil, err)
		return
	}
	b, merr := json.Marshal(v)
	replyRawTo(r, b, merr)
}

func replyRaw(ctx *fasthttp.RequestCtx, body []byte, err error) { replyRawTo(&ctx.Response, body, err) }

// replyRawTo writes replyRaw's answer into r.
func replyRawTo(r *fasthttp.Response, body []byte, err error) {
	r.Header.SetContentType("application/json")
	if err != nil {
		e := sdk.ErrorOf(err)
		r.SetStatusCode(e.Code.HTTPStatus())
		b, _ := json.Marshal(api.ErrorResponse{Error: e})
		r.SetBody(b)
		return
	}
	r.SetStatusCode(fasthttp.StatusOK)
	r.SetBody(body)
}
