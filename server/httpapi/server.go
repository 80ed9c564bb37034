// Package httpapi serves the client API of one lockd over fasthttp: JSON
// bodies, stable error codes, every node and session route answered by the
// cell's leader (a follower answers not_leader with the leader's address).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/server/dirfsm"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"github.com/valyala/fasthttp/pprofhandler"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/internal/connpark"
	"github.com/lockservice/lockd/internal/httpbody"
	"github.com/lockservice/lockd/internal/tlsutil"
	"github.com/lockservice/lockd/server/audit"
	"github.com/lockservice/lockd/server/cell"
)

// RequestTimeout bounds a proposal or read; past it the reply is
// unavailable and the client retries with the same request id.
const RequestTimeout = 5 * time.Second

// Host is the lockd behind the API: the cells it runs now (they come and
// go as the directory places them) and its access to the directory.
type Host interface {
	// Cell returns the replica of a cell this lockd runs.
	Cell(name string) (*cell.Cell, bool)
	// Directory is the lockd's latest view of the directory (routing).
	Directory() *directory.Directory
	// ReadDirectory answers GET /v1/directory: a linearizable read on a
	// lockd hosting a directory replica, its latest view on any other.
	ReadDirectory(ctx context.Context) (api.DirectoryResponse, error)
	// ProposeDirectory commits a directory command, or answers not_leader
	// naming a lockd that hosts a directory replica.
	ProposeDirectory(ctx context.Context, c *dirfsm.Command) (dirfsm.Result, error)
	// RefreshDirectory brings the view up to date with the directory group
	// (a just-committed assignment or move the view has not caught yet).
	RefreshDirectory(ctx context.Context)
	// ChangeMember makes one membership change of c, which this lockd leads.
	ChangeMember(ctx context.Context, c *cell.Cell, req api.MemberRequest) (api.CellInfo, error)
	// ClusterStatus asks every lockd of the directory for its status.
	ClusterStatus(ctx context.Context) api.ClusterStatus
	// ClusterHealth asks every lockd and lockproxy for its status and
	// assesses the cluster (tenants only for an admin).
	ClusterHealth(ctx context.Context, admin bool) api.ClusterHealth
	// CallLockd makes one API call to another lockd as this lockd (its
	// certificate and admin token).
	CallLockd(ctx context.Context, addr, method, route string, body, out any) error
}

// Server answers the API for the cells hosted by one lockd.
type Server struct {
	host     Host
	status   func() api.StatusResponse
	log      *slog.Logger
	metrics  fasthttp.RequestHandler
	requests *prometheus.HistogramVec
	pprof    bool
	backupFn func(ctx context.Context, cell string) (api.BackupResponse, error) // nil: no backup store
	// auth: every request needs a token (EnableAuth); adminDigest is the
	// bootstrap admin token's digest; writes holds tenants to their rate.
	auth        bool
	adminDigest string
	writes      writeLimiter
	// clientCerts: the API runs TLS and every route but /healthz and
	// /metrics needs a verified client certificate.
	clientCerts bool
	refusals    logLimiter
	// dir reads the directory for requests naming what the view lacks.
	dir refresher
	// audit records admin changes and refusals (audit.go); nil: none.
	audit *audit.Log
	// parks holds the connections of parked KeepAlives (park.go).
	parks connpark.Conns
}

// RequireClientCerts refuses (401) a request on any route but /healthz
// and /metrics whose connection presented no certificate the CA signed.
func (s *Server) RequireClientCerts() { s.clientCerts = true }

// EnablePprof serves Go's profiles under /debug/pprof/ (off by default: a
// profile costs the replica CPU, and the heap dump shows request data).
func (s *Server) EnablePprof() { s.pprof = true }

// EnableBackup serves api.RouteAdminBackup with fn (the lockd's backup store).
func (s *Server) EnableBackup(fn func(ctx context.Context, cell string) (api.BackupResponse, error)) {
	s.backupFn = fn
}

// New builds a server. status reports the process; reg receives the HTTP metrics.
func New(host Host, status func() api.StatusResponse, reg *prometheus.Registry, log *slog.Logger) *Server {
	s := &Server{host: host, status: status, log: log}
	s.dir.read, s.dir.gap = host.RefreshDirectory, api.DirectoryRefreshGap
	s.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lockd_http_request_seconds",
		Help:    "API request latency by route and result code.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 15, 30},
	}, []string{"route", "code"})
	reg.MustRegister(s.requests)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lockd_http_idle_conns",
		Help: "Keep-alive connections idle between requests held by the idle poller (no goroutine, no buffer).",
	}, func() float64 { return float64(s.parks.IdleHeld()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "lockd_http_idle_parks_total",
		Help: "Times a connection idle after its answer was handed to the idle poller.",
	}, func() float64 { return float64(s.parks.IdleParks()) }))
	s.metrics = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return s
}

// Handler is the fasthttp request handler.
func (s *Server) Handler(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	route := string(ctx.Path())
	code := s.route(ctx, route)
	if code != "-" {
		s.requests.WithLabelValues(routeLabel(route), code).Observe(time.Since(start).Seconds())
	}
	s.parks.ParkIfIdle(ctx)
}

// routeLabel is a request's route as a metric label: the route itself if
// the API has it, else one fixed label, whoever sent it (a label per
// path a caller makes up would grow /metrics without bound).
func routeLabel(route string) string {
	if _, ok := postRoutes[route]; ok || getRoutes[route] || mutant.On(mutant.RouteLabel) {
		return route
	}
	return "other"
}

// bodyless reports whether route is one the server answers without a
// body: one sent is refused.
func bodyless(route string) bool {
	switch route {
	case api.RouteHealth, api.RouteMetrics, api.RouteStatusPage:
		return true
	}
	return getRoutes[route] || strings.HasPrefix(route, "/debug/pprof")
}

// getRoutes are the routes answered to GET besides the POST routes.
var getRoutes = map[string]bool{api.RouteStatus: true, api.RouteDirectory: true, api.RouteAdminTenants: true, api.RouteStatusCluster: true, api.RouteStatusHealth: true}

// route serves one request and returns the result code for metrics ("-" to
// skip recording, for unknown routes).
func (s *Server) route(ctx *fasthttp.RequestCtx, route string) string {
	startTrace(ctx)
	if bodyless(route) && !mutant.On(mutant.BodyLimit) {
		// Only a POST route takes a body (read by httpbody.Read, after the
		// caller is known); any other route's body is refused unread: a
		// handler such as /metrics's adaptor would read it whole.
		if err := httpbody.Read(ctx, 0); err != nil {
			return s.reply(ctx, nil, err)
		}
	}
	if s.servePublic(ctx, route) {
		return "-"
	}
	if s.clientCerts && !tlsutil.HasClientCert(ctx.TLSConnectionState()) && !mutant.On(mutant.ClientCerts) {
		return s.reply(ctx, nil, api.Errorf(api.CodeUnauthorized, "this lockd requires a client certificate its CA signed (mutual TLS: --tls-cert, --tls-key, --tls-ca)"))
	}
	p, err := s.authenticate(ctx)
	if err != nil {
		s.auditUnauthenticated(ctx, route, err)
		ctx.SetConnectionClose() // its body, if any, is left unread
		return s.reply(ctx, nil, err)
	}
	if getRoutes[route] {
		v, err := s.serveGet(route, p)
		return s.reply(ctx, v, err)
	}
	if s.pprof && strings.HasPrefix(route, "/debug/pprof") {
		if err := needAdmin(p); err != nil {
			return s.reply(ctx, nil, err)
		}
		pprofhandler.PprofHandler(ctx)
		return "-"
	}
	h, ok := postRoutes[route]
	if !ok {
		writeError(ctx, fasthttp.StatusNotFound, api.Errorf(api.CodeBadRequest, "no route %s", route))
		return "-"
	}
	if !ctx.IsPost() {
		return s.reply(ctx, nil, api.Errorf(api.CodeBadRequest, "%s takes POST", route))
	}
	if err := httpbody.Read(ctx, bodyLimit(route, p)); err != nil {
		return s.reply(ctx, nil, err)
	}
	v, err := s.audited(ctx, route, p, h)
	if _, ok := v.(parkedSentinel); ok {
		return "-" // answered on its connection later (park.go), and counted then
	}
	code := s.reply(ctx, v, err)
	finishTrace(ctx)
	return code
}

// servePublic answers the routes that need no credential, and reports
// whether route is one.
func (s *Server) servePublic(ctx *fasthttp.RequestCtx, route string) bool {
	switch route {
	case api.RouteHealth:
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetBodyString("ok\n")
	case api.RouteMetrics:
		s.metrics(ctx)
	case api.RouteStatusPage:
		// The page holds no data: it reads the API (with the token the
		// user gives it), so it needs no credential itself.
		ctx.SetContentType("text/html; charset=utf-8")
		ctx.Response.Header.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		ctx.SetBody(statusPage)
	default:
		return false
	}
	return true
}

// serveGet answers one of getRoutes for p.
func (s *Server) serveGet(route string, p principal) (any, error) {
	switch route {
	case api.RouteStatus:
		// A replica's status names every cell and lockd: an operator's
		// view (docs/api.md, "Who may call what").
		if err := needAdmin(p); err != nil {
			return nil, err
		}
		return s.status(), nil
	case api.RouteDirectory:
		cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		d, err := s.host.ReadDirectory(cctx)
		if !p.admin {
			d.Tenants = nil // token digests are for admins (and lockproxies, which run as one)
		}
		return d, err
	case api.RouteAdminTenants:
		return s.tenants(p)
	case api.RouteStatusCluster:
		if err := needAdmin(p); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		return s.host.ClusterStatus(cctx), nil
	case api.RouteStatusHealth:
		// Names every cell, lockd, proxy and tenant: an operator's view.
		if err := needAdmin(p); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		return s.host.ClusterHealth(cctx, p.admin), nil
	}
	return nil, api.Errorf(api.CodeInternal, "no GET handler for %s", route)
}

// handler serves one POST route for principal p (authenticated): it
// decodes the request, checks p's role on what it names (the admin role
// on / for a cluster operation) and its limits, then calls the cell or
// the directory.
type handler func(s *Server, ctx *fasthttp.RequestCtx, p principal) (any, error)

var postRoutes map[string]handler

func init() {
	postRoutes = map[string]handler{
		api.RouteSessionOpen:        (*Server).openSession,
		api.RouteSessionKeepAlive:   (*Server).keepAlive,
		api.RouteSessionClose:       (*Server).closeSession,
		api.RouteKeepAliveBatch:     (*Server).keepAliveBatch,
		api.RouteAdminProxyRegister: (*Server).registerProxy,
		api.RouteCreate:             (*Server).create,
		api.RoutePut:                (*Server).put,
		api.RouteDelete:             (*Server).delete,
		api.RouteTxn:                (*Server).txn, // txn.go
		api.RouteLockMode:           (*Server).lockMode,
		api.RouteGet:                (*Server).get,
		api.RouteChildren:           (*Server).children,
		api.RouteRange:              (*Server).rangeRead,   // ranges.go
		api.RouteRanges:             (*Server).rangesRead,  // ranges.go
		api.RouteChanges:            (*Server).changesRead, // ranges.go
		api.RouteLockState:          (*Server).lockState,
		api.RouteLockQueue:          (*Server).lockQueue,
		api.RouteLockCheck:          (*Server).lockCheck,
		api.RouteWatch:              (*Server).watch,
		api.RouteAdminSnapshot:      (*Server).snapshot,
		api.RouteAdminBackup:        (*Server).backup,
		api.RouteAdminCellCreate:    (*Server).createCell,
		api.RouteAdminPrefixAssign:  (*Server).assignPrefix,
		api.RouteAdminRegister:      (*Server).registerLockd,
		api.RouteAdminMigrate:       (*Server).migrate,
		api.RouteAdminPrefixOp:      (*Server).prefixOp,
		api.RouteAdminMember:        (*Server).member,
		api.RouteAdminRestore:       (*Server).restoreCell,
		api.RouteAdminTransfer:      (*Server).transfer,
		api.RouteAdminTenant:        (*Server).tenant,
		api.RouteAdminTenantCommit:  (*Server).commitTenant,
		api.RouteAdminMemberRecord:  (*Server).recordMember,
	}
}

func (s *Server) reply(ctx *fasthttp.RequestCtx, v any, err error) string {
	return s.replyTo(&ctx.Response, facts{ctx: ctx, wire: wireRequest(ctx)}, v, err)
}

// facts is what answering a request needs of it besides its result. While
// its handler runs they are read from ctx, and only for a refusal's log
// line; a parked KeepAlive (park.go), answered after its context is gone,
// keeps copies (requestFacts).
type facts struct {
	ctx                 *fasthttp.RequestCtx // nil: the copies below
	route, client, cell string
	wire                bool // it came in the binary encoding, on a route that takes it
}

// requestFacts copies ctx's facts.
func requestFacts(ctx *fasthttp.RequestCtx) facts {
	f := facts{ctx: ctx, wire: wireRequest(ctx)}
	return facts{route: f.routeName(), client: f.clientAddr(), cell: f.cellName(), wire: f.wire}
}

func (f facts) routeName() string {
	if f.ctx != nil {
		return string(f.ctx.Path())
	}
	return f.route
}

func (f facts) clientAddr() string {
	if f.ctx != nil {
		return f.ctx.RemoteAddr().String()
	}
	return f.client
}

func (f facts) cellName() string {
	if f.ctx != nil {
		return string(f.ctx.Request.Header.Peek(api.HeaderCell))
	}
	return f.cell
}

// replyTo writes a request's answer (v, or err) into resp and returns its
// result code for metrics.
func (s *Server) replyTo(resp *fasthttp.Response, f facts, v any, err error) string {
	resp.Header.SetContentType("application/json")
	if err != nil {
		var ae *api.Error
		if !errors.As(err, &ae) {
			ae = api.Errorf(api.CodeInternal, "%v", err)
		}
		ae = markNotApplied(ae, err)
		switch ae.Code {
		case api.CodeInternal:
			s.log.Error("internal error", "route", f.routeName(), "err", err)
		case api.CodeBadRequest, api.CodeInvalidPath, api.CodeValueTooLarge, api.CodeLimitExceeded,
			api.CodeUnauthorized, api.CodeStaleRequest, api.CodeTokenExhausted, api.CodeForbidden, api.CodeQuotaExceeded:
			// Refusals an operator traces to a client: one line each, up
			// to refusalLogBurst a second per code (a flood refused by
			// its quota must not become a flood of log lines); the next
			// line says how many were left out.
			if ok, skipped := s.refusals.allow(string(ae.Code), time.Now()); ok {
				s.log.Info("request refused", "route", f.routeName(), "code", ae.Code, "client", f.clientAddr(),
					"cell", f.cellName(), "err", ae.Message, "unlogged_before", skipped)
			}
		default:
			// Routine answers (not_leader, no_node, version_mismatch, …).
			s.log.Debug("request refused", "route", f.routeName(), "code", ae.Code, "client", f.clientAddr(), "err", ae.Message)
		}
		writeErrorTo(resp, ae.Code.HTTPStatus(), ae)
		return string(ae.Code)
	}
	if replyWire(resp, f, v) {
		return "ok"
	}
	b, merr := json.Marshal(v)
	if merr != nil {
		return s.replyTo(resp, f, nil, merr)
	}
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.SetBody(b)
	return "ok"
}

// markNotApplied is ae, marked not_applied when it is the cell state's
// own unavailable refusal (err is, or wraps, a cell.Refusal whose error
// is ae: the state refused the request outright, nothing applied, safe
// to resend). Pure: ae itself is not changed.
func markNotApplied(ae *api.Error, err error) *api.Error {
	var r *cell.Refusal
	if ae.Code != api.CodeUnavailable || ae.NotApplied || !errors.As(err, &r) || r.Err != ae {
		return ae
	}
	c := *ae
	c.NotApplied = true
	return &c
}

func writeError(ctx *fasthttp.RequestCtx, status int, e *api.Error) {
	writeErrorTo(&ctx.Response, status, e)
}

func writeErrorTo(resp *fasthttp.Response, status int, e *api.Error) {
	resp.Header.SetContentType("application/json")
	resp.SetStatusCode(status)
	b, _ := json.Marshal(api.ErrorResponse{Error: e})
	resp.SetBody(b)
}

// ErrorHandler answers requests fasthttp rejects before routing (an
// over-size or unparsable request) with the same JSON error body as every
// other failure.
func ErrorHandler(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeError(ctx, fasthttp.StatusRequestEntityTooLarge, api.Errorf(api.CodeValueTooLarge, "request body over %d bytes", api.MaxRequestBody))
		return
	}
	writeError(ctx, fasthttp.StatusBadRequest, api.Errorf(api.CodeBadRequest, "malformed request: %v", err))
}

func decode(ctx *fasthttp.RequestCtx, v any) error {
	if err := json.Unmarshal(ctx.PostBody(), v); err != nil {
		return api.Errorf(api.CodeBadRequest, "malformed JSON body: %v", err)
	}
	return nil
}
