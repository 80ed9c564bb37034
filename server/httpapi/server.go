// Package httpapi serves the client API of one lockd over fasthttp: JSON
// bodies, stable error codes, every node and session route answered by the
// cell's leader (a follower answers not_leader with the leader's address).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockservice/lockd/server/dirfsm"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"github.com/valyala/fasthttp/pprofhandler"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/internal/httpbody"
	"github.com/lockservice/lockd/internal/tlsutil"
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
}

// routeLabel is a request's route as a metric label: the route itself if
// the API has it, else one fixed label, whoever sent it (a label per
// path a caller makes up would grow /metrics without bound).
func routeLabel(route string) string {
	if _, ok := postRoutes[route]; ok || getRoutes[route] || brokenRouteLabel {
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
var getRoutes = map[string]bool{api.RouteStatus: true, api.RouteDirectory: true, api.RouteAdminTenants: true, api.RouteStatusCluster: true}

// route serves one request and returns the result code for metrics ("-" to
// skip recording, for unknown routes).
func (s *Server) route(ctx *fasthttp.RequestCtx, route string) string {
	if bodyless(route) && !brokenBodyLimit {
		// Only a POST route takes a body (read by httpbody.Read, after the
		// caller is known); any other route's body is refused unread: a
		// handler such as /metrics's adaptor would read it whole.
		if err := httpbody.Read(ctx, 0); err != nil {
			return s.reply(ctx, nil, err)
		}
	}
	switch route {
	case api.RouteHealth:
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetBodyString("ok\n")
		return "-"
	case api.RouteMetrics:
		s.metrics(ctx)
		return "-"
	case api.RouteStatusPage:
		// The page holds no data: it reads the API (with the token the
		// user gives it), so it needs no credential itself.
		ctx.SetContentType("text/html; charset=utf-8")
		ctx.Response.Header.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
		ctx.SetBody(statusPage)
		return "-"
	}
	if s.clientCerts && !tlsutil.HasClientCert(ctx.TLSConnectionState()) && !brokenClientCerts {
		return s.reply(ctx, nil, api.Errorf(api.CodeUnauthorized, "this lockd requires a client certificate its CA signed (mutual TLS: --tls-cert, --tls-key, --tls-ca)"))
	}
	p, err := s.authenticate(ctx)
	if err != nil {
		ctx.SetConnectionClose() // its body, if any, is left unread
		return s.reply(ctx, nil, err)
	}
	switch route {
	case api.RouteStatus:
		// A replica's status names every cell and lockd: an operator's
		// view (docs/api.md, "Who may call what").
		if err := needAdmin(p); err != nil {
			return s.reply(ctx, nil, err)
		}
		return s.reply(ctx, s.status(), nil)
	case api.RouteDirectory:
		cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		d, err := s.host.ReadDirectory(cctx)
		if !p.admin {
			d.Tenants = nil // token digests are for admins (and lockproxies, which run as one)
		}
		return s.reply(ctx, d, err)
	case api.RouteAdminTenants:
		v, err := s.tenants(p)
		return s.reply(ctx, v, err)
	case api.RouteStatusCluster:
		if err := needAdmin(p); err != nil {
			return s.reply(ctx, nil, err)
		}
		cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		return s.reply(ctx, s.host.ClusterStatus(cctx), nil)
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
	v, err := h(s, ctx, p)
	return s.reply(ctx, v, err)
}

// handler serves one POST route for principal p (authenticated; each
// handler checks p's role on what the request names).
type handler func(s *Server, ctx *fasthttp.RequestCtx, p principal) (any, error)

// adminOnly wraps a cluster operation: the admin role on / is needed.
func adminOnly(h func(s *Server, ctx *fasthttp.RequestCtx) (any, error)) handler {
	return func(s *Server, ctx *fasthttp.RequestCtx, p principal) (any, error) {
		if err := needAdmin(p); err != nil {
			return nil, err
		}
		return h(s, ctx)
	}
}

var postRoutes map[string]handler

func init() {
	postRoutes = map[string]handler{
		api.RouteSessionOpen:      (*Server).openSession,
		api.RouteSessionKeepAlive: (*Server).keepAlive,
		api.RouteSessionClose:     (*Server).closeSession,
		api.RouteKeepAliveBatch: func(s *Server, ctx *fasthttp.RequestCtx, p principal) (any, error) {
			if err := needAdmin(p); err != nil { // lockproxies run as admins
				return nil, err
			}
			return s.keepAliveBatch(ctx, p)
		},
		api.RouteAdminProxyRegister: adminOnly((*Server).registerProxy),
		api.RouteCreate:             (*Server).create,
		api.RoutePut:                (*Server).put,
		api.RouteDelete:             (*Server).delete,
		api.RouteGet:                (*Server).get,
		api.RouteChildren:           (*Server).children,
		api.RouteLockState:          (*Server).lockState,
		api.RouteLockQueue:          (*Server).lockQueue,
		api.RouteLockCheck:          (*Server).lockCheck,
		api.RouteWatch:              (*Server).watch,
		api.RouteAdminSnapshot:      adminOnly((*Server).snapshot),
		api.RouteAdminBackup:        adminOnly((*Server).backup),
		api.RouteAdminCellCreate:    adminOnly((*Server).createCell),
		api.RouteAdminPrefixAssign:  adminOnly((*Server).assignPrefix),
		api.RouteAdminRegister:      adminOnly((*Server).registerLockd),
		api.RouteAdminMigrate:       adminOnly((*Server).migrate),
		api.RouteAdminPrefixOp:      adminOnly((*Server).prefixOp),
		api.RouteAdminMember:        adminOnly((*Server).member),
		api.RouteAdminRestore:       adminOnly((*Server).restoreCell),
		api.RouteAdminTransfer:      adminOnly((*Server).transfer),
		api.RouteAdminTenant:        (*Server).tenant,
		api.RouteAdminTenantCommit:  adminOnly((*Server).commitTenant),
	}
}

func (s *Server) reply(ctx *fasthttp.RequestCtx, v any, err error) string {
	ctx.SetContentType("application/json")
	if err != nil {
		var ae *api.Error
		if !errors.As(err, &ae) {
			ae = api.Errorf(api.CodeInternal, "%v", err)
		}
		switch ae.Code {
		case api.CodeInternal:
			s.log.Error("internal error", "route", string(ctx.Path()), "err", err)
		case api.CodeBadRequest, api.CodeInvalidPath, api.CodeValueTooLarge, api.CodeLimitExceeded,
			api.CodeUnauthorized, api.CodeStaleRequest, api.CodeTokenExhausted, api.CodeForbidden, api.CodeQuotaExceeded:
			// Refusals an operator traces to a client: one line each, up
			// to refusalLogBurst a second per code (a flood refused by
			// its quota must not become a flood of log lines); the next
			// line says how many were left out.
			if ok, skipped := s.refusals.allow(string(ae.Code), time.Now()); ok {
				s.log.Info("request refused", "route", string(ctx.Path()), "code", ae.Code, "client", ctx.RemoteAddr().String(),
					"cell", string(ctx.Request.Header.Peek(api.HeaderCell)), "err", ae.Message, "unlogged_before", skipped)
			}
		default:
			// Routine answers (not_leader, no_node, version_mismatch, …).
			s.log.Debug("request refused", "route", string(ctx.Path()), "code", ae.Code, "client", ctx.RemoteAddr().String(), "err", ae.Message)
		}
		writeError(ctx, ae.Code.HTTPStatus(), ae)
		return string(ae.Code)
	}
	b, merr := json.Marshal(v)
	if merr != nil {
		return s.reply(ctx, nil, merr)
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(b)
	return "ok"
}

func writeError(ctx *fasthttp.RequestCtx, status int, e *api.Error) {
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(status)
	b, _ := json.Marshal(api.ErrorResponse{Error: e})
	ctx.SetBody(b)
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

// cellForPath validates a path and returns the ready leader replica serving it.
func (s *Server) cellForPath(ctx *fasthttp.RequestCtx, path string) (*cell.Cell, error) {
	if err := api.ValidatePath(path); err != nil {
		return nil, err
	}
	if name := string(ctx.Request.Header.Peek(api.HeaderCell)); name != "" {
		return s.readyCell(ctx, name) // the client's routing; the cell's state has the last word
	}
	info, err := s.host.Directory().CellFor(path)
	if err != nil {
		return nil, err
	}
	return s.readyCell(ctx, info.Name)
}

func (s *Server) readyCell(ctx *fasthttp.RequestCtx, name string) (*cell.Cell, error) {
	if name == "" {
		return nil, api.Errorf(api.CodeBadRequest, "no cell named")
	}
	c, ok := s.host.Cell(name)
	if !ok {
		// The client knows a cell this lockd does not host, or its view
		// does not know (one just created, or moved by a restore or a
		// membership change, perhaps here): read the directory, which
		// starts the replicas it places here, and look again (refreshFor:
		// a few coalesced reads, briefly: the directory may be electing,
		// and a refusal now is better than a request held past its
		// client's patience).
		s.refreshFor(func() bool { c, ok = s.host.Cell(name); return ok })
	}
	if !ok {
		if info, known := s.host.Directory().Cell(name); known {
			// Not here: name a replica that is, as a leader hint (never
			// applied, so safe to resend), for a client whose view of the
			// cell's replicas is older than this lockd's.
			if hint := otherReplica(info, ctx.LocalAddr().String()); hint != "" && !brokenNoHostHint {
				return nil, &api.Error{Code: api.CodeNotLeader, Leader: hint,
					Message: fmt.Sprintf("cell %s is not hosted by this lockd; its replicas are at %v", name, info.Endpoints)}
			}
			return nil, api.Errorf(api.CodeWrongCell, "cell %s is not hosted by this lockd", name)
		}
		return nil, api.Errorf(api.CodeWrongCell, "no cell %s", name)
	}
	if err := waitUsable(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// otherReplica is the API address of one of the cell's voting replicas
// other than self ("" if none).
func otherReplica(info api.CellInfo, self string) string {
	for _, r := range info.Replicas {
		if !r.Learner && r.APIAddr != "" && r.APIAddr != self {
			return r.APIAddr
		}
	}
	for _, e := range info.Endpoints {
		if e != self {
			return e
		}
	}
	return ""
}

// unknownCellRefresh bounds the directory read a request naming a cell
// unknown to this lockd makes.
const unknownCellRefresh = time.Second

// waitUsable is c.Ready, or, when the client allows it (api.HeaderWaitLeaderMS),
// c.WaitUsable for up to that long: during a fail-over the request is held
// until this replica learns of a leader, not sent back to poll.
func waitUsable(ctx *fasthttp.RequestCtx, c *cell.Cell) error {
	err := c.Ready()
	if err == nil {
		return nil // the common case: no hold, no timer
	}
	hold := holdBudget(ctx)
	if hold <= 0 {
		return err
	}
	hctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	return c.WaitUsable(hctx, string(ctx.Request.Header.Peek(api.HeaderUnreachable)))
}

func checkValue(v []byte) error {
	if len(v) > api.MaxValueSize {
		return api.Errorf(api.CodeValueTooLarge, "value is %d bytes, limit %d", len(v), api.MaxValueSize)
	}
	return nil
}

// onPath serves a request aimed at a path: decode into req, check it, find
// the ready leader of the path's cell, run op under RequestTimeout.
func (s *Server) onPath(ctx *fasthttp.RequestCtx, req any, path func() string, check func() error, op func(context.Context, *cell.Cell) (any, error)) (any, error) {
	if err := decode(ctx, req); err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, err
		}
	}
	c, err := s.cellForPath(ctx, path())
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	var holdUntil time.Time // set at the first hold: most requests need none
	refreshed := false
	for attempt := 0; ; attempt++ {
		v, err := op(cctx, c)
		if notServedYet(err) && !refreshed && !s.incoming(c, path()) {
			// Perhaps the view is behind the directory: read it once.
			refreshed = true
			s.dir.refresh(cctx)
		}
		if !notServedYet(err) || !s.incoming(c, path()) {
			return v, err
		}
		// The directory gives the prefix to this cell, which does not
		// serve it yet: it was just assigned (the leader adopts it within
		// a few milliseconds), or a migration is bringing it here (served
		// once the move commits). The state refused the request outright,
		// so it is safe to run again: hold it, as a fail-over does.
		if attempt == 0 {
			holdUntil = time.Now().Add(holdBudget(ctx))
		}
		if time.Now().After(holdUntil) || attempt >= 500 {
			return nil, api.Errorf(api.CodeUnavailable, "cell %s is taking up prefix %s: retry", c.Info().Name, api.Prefix(path()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// notServedYet reports whether err is the cell's state refusing a request
// because it does not serve the prefix (yet): wrong_cell (never had it)
// or unavailable (a copy is arriving). Not moved: that is final here.
func notServedYet(err error) bool {
	if !cell.IsRefusal(err) {
		return false // Raft's errors: a timeout may still apply
	}
	code := api.CodeOf(err)
	return code == api.CodeWrongCell || code == api.CodeUnavailable
}

// incoming reports whether this lockd's directory view gives path's
// prefix to c, or is moving it there.
func (s *Server) incoming(c *cell.Cell, path string) bool {
	name := c.Info().Name
	pi, err := s.host.Directory().PrefixFor(path)
	return err == nil && (pi.Cell == name || pi.Migration != nil && pi.Migration.To == name)
}

// holdBudget is how long a request may be held: what the client allows
// (api.HeaderWaitLeaderMS), at most api.MaxLeaderWait.
func holdBudget(ctx *fasthttp.RequestCtx) time.Duration {
	ms, err := strconv.Atoi(string(ctx.Request.Header.Peek(api.HeaderWaitLeaderMS)))
	if err != nil || ms <= 0 {
		return 0
	}
	return min(time.Duration(ms)*time.Millisecond, api.MaxLeaderWait)
}

// onCell serves a request aimed at a named cell (sessions, watch lists).
func (s *Server) onCell(ctx *fasthttp.RequestCtx, req any, cellName func() string, check func() error, deadline func() time.Duration, op func(context.Context, *cell.Cell) (any, error)) (any, error) {
	if err := decode(ctx, req); err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, err
		}
	}
	c, err := s.readyCell(ctx, cellName())
	if err != nil {
		return nil, err
	}
	d := RequestTimeout
	if deadline != nil {
		d = deadline()
	}
	cctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return op(cctx, c)
}

func needSession(id uint64, what string) error {
	if id == 0 {
		return api.Errorf(api.CodeNoSession, "%s names no session", what)
	}
	return nil
}

func (s *Server) openSession(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.OpenSessionRequest
	return s.onCell(ctx, &req, func() string { return req.Cell }, func() error {
		if len(req.Nonce) > api.MaxNonceLen {
			return api.Errorf(api.CodeBadRequest, "nonce is %d bytes, limit %d", len(req.Nonce), api.MaxNonceLen)
		}
		return nil
	}, nil, func(cctx context.Context, c *cell.Cell) (any, error) {
		return c.OpenSession(cctx, req, p.caller())
	})
}

func (s *Server) keepAlive(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.KeepAliveRequest
	return s.onCell(ctx, &req, func() string { return req.Cell },
		func() error { return needSession(req.Session, "keepalive") },
		func() time.Duration {
			return min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxKeepAliveWait) + RequestTimeout
		},
		func(cctx context.Context, c *cell.Cell) (any, error) { return c.KeepAlive(cctx, req, s.renewCheck(p)) })
}

func (s *Server) keepAliveBatch(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.KeepAliveBatchRequest
	return s.onCell(ctx, &req, func() string { return req.Cell }, nil,
		func() time.Duration {
			return min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxBatchWait) + RequestTimeout
		},
		func(cctx context.Context, c *cell.Cell) (any, error) {
			return c.KeepAliveBatch(cctx, req, s.renewCheck(p))
		})
}

func (s *Server) closeSession(ctx *fasthttp.RequestCtx, _ principal) (any, error) {
	var req api.CloseSessionRequest
	return s.onCell(ctx, &req, func() string { return req.Cell },
		func() error { return needSession(req.Session, "close") }, nil,
		func(cctx context.Context, c *cell.Cell) (any, error) { return struct{}{}, c.CloseSession(cctx, req) })
}

// A lock node needs the lock role (or write); any other node the write
// role. With only the lock role, a tenant changes and deletes only its
// own sessions' ephemeral nodes (OwnOnly: the state machine checks).
func (s *Server) create(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.CreateRequest
	var who cell.Caller
	return s.onPath(ctx, &req, func() string { return req.Path }, func() error {
		role := api.RoleWrite
		if req.Lock != api.LockNone && !p.allows(api.RoleWrite, req.Path) {
			role = api.RoleLock
		}
		if err := need(p, role, req.Path); err != nil {
			return err
		}
		who = p.callerOn(role, req.Path)
		return firstErr(checkValue(req.Value), s.limitWrites(p))
	}, func(cctx context.Context, c *cell.Cell) (any, error) { return c.Create(cctx, req, who) })
}

func (s *Server) put(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.PutRequest
	var who cell.Caller
	return s.onPath(ctx, &req, func() string { return req.Path }, func() error {
		var err error
		who, err = s.writer(p, req.Path, req.Session)
		return firstErr(err, checkValue(req.Value), s.limitWrites(p))
	}, func(cctx context.Context, c *cell.Cell) (any, error) { return c.Put(cctx, req, who) })
}

func (s *Server) delete(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.DeleteRequest
	var who cell.Caller
	return s.onPath(ctx, &req, func() string { return req.Path }, func() error {
		var err error
		who, err = s.writer(p, req.Path, req.Session)
		return firstErr(err, s.limitWrites(p))
	}, func(cctx context.Context, c *cell.Cell) (any, error) { return c.Delete(cctx, req, who) })
}

// writer authorizes a put or delete of path: the write role, or the lock
// role for the request's own session's ephemeral nodes only.
func (s *Server) writer(p principal, path string, session uint64) (cell.Caller, error) {
	if p.allows(api.RoleWrite, path) {
		return p.callerOn(api.RoleWrite, path), nil
	}
	if session != 0 && p.allows(api.RoleLock, path) {
		who := p.callerOn(api.RoleLock, path)
		who.OwnOnly = true
		return who, nil
	}
	return p.caller(), need(p, api.RoleWrite, path)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkWatchKind accepts no watch or one of the allowed kinds.
func checkWatchKind(k api.WatchKind, allowed ...api.WatchKind) error {
	if k == "" || slices.Contains(allowed, k) {
		return nil
	}
	return api.Errorf(api.CodeBadRequest, "watch kind %q is not one of %v here", k, allowed)
}

// checkCacheWindow refuses a negative declared cache window.
func checkCacheWindow(ms int64) error {
	if ms < 0 {
		return api.Errorf(api.CodeBadRequest, "cache_window_ms %d is negative", ms)
	}
	return nil
}

func (s *Server) get(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.ReadRequest
	return s.onPath(ctx, &req, func() string { return req.Path }, func() error {
		return firstErr(need(p, api.RoleRead, req.Path), checkWatchKind(req.Watch, api.WatchData, api.WatchChildren), checkCacheWindow(req.CacheWindowMS))
	},
		func(cctx context.Context, c *cell.Cell) (any, error) { return c.Get(cctx, req, s.grantCheck(p)) })
}

func (s *Server) children(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.ReadRequest
	return s.onPath(ctx, &req, func() string { return req.Path }, func() error {
		return firstErr(need(p, api.RoleRead, req.Path), checkWatchKind(req.Watch, api.WatchChildren))
	},
		func(cctx context.Context, c *cell.Cell) (any, error) { return c.Children(cctx, req) })
}

func (s *Server) lockState(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.LockStateRequest
	return s.onPath(ctx, &req, func() string { return req.Path }, func() error { return need(p, api.RoleRead, req.Path) },
		func(cctx context.Context, c *cell.Cell) (any, error) { return c.LockState(cctx, req) })
}

// lockCheck answers whether a fencing token holds its lock now (the
// resource side of fencing, for resources that keep no high-water mark).
func (s *Server) lockCheck(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.LockCheckRequest
	return s.onPath(ctx, &req, func() string { return req.Path }, func() error {
		if req.Token == 0 {
			return api.Errorf(api.CodeBadRequest, "lock check needs the token to check (a grant's fencing token, never 0)")
		}
		return need(p, api.RoleRead, req.Path)
	},
		func(cctx context.Context, c *cell.Cell) (any, error) { return c.CheckLock(cctx, req) })
}

// lockQueue answers a lock's queue for the status page, which can reach
// only the lockd that served it: a lockd that does not lead the cell asks
// the one that does (at most a few hops; a forwarded request is not
// forwarded again), once the caller's read role is checked here.
func (s *Server) lockQueue(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.LockQueueRequest
	v, err := s.onPath(ctx, &req, func() string { return req.Path }, func() error { return need(p, api.RoleRead, req.Path) },
		func(cctx context.Context, c *cell.Cell) (any, error) { return c.LockQueue(cctx, req.Path) })
	code := api.CodeOf(err)
	if len(ctx.Request.Header.Peek(api.HeaderForwarded)) > 0 || (code != api.CodeNotLeader && code != api.CodeWrongCell) {
		return v, err
	}
	addr := ""
	var ae *api.Error
	if errors.As(err, &ae) && ae.Leader != "" {
		addr = ae.Leader
	} else if info, derr := s.host.Directory().CellFor(req.Path); derr == nil && len(info.Endpoints) > 0 {
		addr = info.Endpoints[0]
	}
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	for hop := 0; hop < 3 && addr != ""; hop++ {
		var resp api.LockQueueResponse
		err = s.host.CallLockd(cctx, addr, "POST", api.RouteLockQueue, req, &resp)
		if err == nil {
			return resp, nil
		}
		addr = ""
		if errors.As(err, &ae) && ae.Code == api.CodeNotLeader {
			addr = ae.Leader
		}
	}
	return nil, err
}

func (s *Server) watch(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.WatchRequest
	return s.onCell(ctx, &req, func() string { return req.Cell }, func() error {
		if len(req.Watches) > api.MaxWatchesPerCall {
			return api.Errorf(api.CodeBadRequest, "%d watches, limit %d per call", len(req.Watches), api.MaxWatchesPerCall)
		}
		for _, w := range req.Watches {
			if err := api.ValidatePath(w.Path); err != nil {
				return err
			}
			if err := need(p, api.RoleRead, w.Path); err != nil {
				return err
			}
			if w.Kind != api.WatchData && w.Kind != api.WatchChildren {
				return api.Errorf(api.CodeBadRequest, "unknown watch kind %q", w.Kind)
			}
			if info, err := s.host.Directory().CellFor(w.Path); err != nil || info.Name != req.Cell {
				return api.Errorf(api.CodeWrongCell, "%s is not served by cell %s", w.Path, req.Cell)
			}
		}
		return nil
	}, nil, func(cctx context.Context, c *cell.Cell) (any, error) { return c.Watch(cctx, req) })
}

// snapshot saves a snapshot on this replica, leader or not.
func (s *Server) snapshot(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.SnapshotRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	c, ok := s.host.Cell(req.Cell)
	if !ok {
		return nil, api.Errorf(api.CodeWrongCell, "cell %q is not hosted by this lockd", req.Cell)
	}
	// A large state takes seconds to write; a minute bounds a stuck disk.
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.Snapshot(cctx)
}

// backup exports a snapshot of the cell to the backup store, on its leader
// (a follower answers not_leader, so the backup is of the newest state).
func (s *Server) backup(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.BackupRequest
	return s.onCell(ctx, &req, func() string { return req.Cell }, func() error {
		if s.backupFn == nil {
			return api.Errorf(api.CodeBadRequest, "this lockd has no backup store: start it with --backup-dir")
		}
		return nil
	}, func() time.Duration { return 5 * time.Minute }, func(cctx context.Context, _ *cell.Cell) (any, error) {
		return s.backupFn(cctx, req.Cell)
	})
}

// --- directory administration ---

// proposeDirectory decodes req, builds its command and commits it.
func (s *Server) proposeDirectory(ctx *fasthttp.RequestCtx, req any, build func() *dirfsm.Command) (any, error) {
	if err := decode(ctx, req); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	return s.host.ProposeDirectory(cctx, build())
}

func (s *Server) createCell(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.CreateCellRequest
	return s.proposeDirectory(ctx, &req, func() *dirfsm.Command {
		return &dirfsm.Command{Op: dirfsm.OpCreateCell, CreateCell: &req}
	})
}

func (s *Server) restoreCell(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.RestoreCellRequest
	return s.proposeDirectory(ctx, &req, func() *dirfsm.Command {
		return &dirfsm.Command{Op: dirfsm.OpRestore, Restore: &req}
	})
}

func (s *Server) assignPrefix(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.AssignPrefixRequest
	return s.proposeDirectory(ctx, &req, func() *dirfsm.Command {
		return &dirfsm.Command{Op: dirfsm.OpAssign, Assign: &req}
	})
}

func (s *Server) registerLockd(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.RegisterLockdRequest
	return s.proposeDirectory(ctx, &req, func() *dirfsm.Command {
		return &dirfsm.Command{Op: dirfsm.OpRegister, Lockd: &req.LockdInfo}
	})
}

func (s *Server) commitTenant(ctx *fasthttp.RequestCtx) (any, error) {
	var req dirfsm.TenantChange
	return s.proposeDirectory(ctx, &req, func() *dirfsm.Command {
		return &dirfsm.Command{Op: dirfsm.OpTenant, Tenant: &req}
	})
}

func (s *Server) registerProxy(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.ProxyInfo
	return s.proposeDirectory(ctx, &req, func() *dirfsm.Command {
		return &dirfsm.Command{Op: dirfsm.OpRegisterProxy, Proxy: &req}
	})
}

func (s *Server) migrate(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.MigrateRequest
	v, err := s.proposeDirectory(ctx, &req, func() *dirfsm.Command {
		return &dirfsm.Command{Op: dirfsm.OpMigrate, Migrate: &req}
	})
	if err == nil {
		s.log.Info("migration step", "prefix", req.Prefix, "action", req.Action, "to", req.To, "began_at", req.BeganAt)
	}
	return v, err
}

// prefixOp runs a migration step on the named cell's leader.
func (s *Server) prefixOp(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.PrefixOpRequest
	return s.onCell(ctx, &req, func() string { return req.Cell }, func() error {
		if err := api.ValidatePath(req.Prefix); err != nil || api.Parent(req.Prefix) != "/" {
			return api.Errorf(api.CodeInvalidPath, "%q is not a top-level prefix", req.Prefix)
		}
		return nil
	}, func() time.Duration { return time.Minute }, func(cctx context.Context, c *cell.Cell) (any, error) {
		v, err := c.PrefixOp(cctx, req)
		if err == nil && (req.Op != api.PrefixStage || req.First || req.Last) { // one line per copy, not per page
			s.log.Info("migration step", "cell", req.Cell, "prefix", req.Prefix, "op", req.Op, "to", req.To, "dir_index", req.DirIndex, "epoch", req.Epoch, "first", req.First, "last", req.Last)
		}
		return v, err
	})
}

// member runs one membership change on the named cell's leader.
func (s *Server) member(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.MemberRequest
	return s.onCell(ctx, &req, func() string { return req.Cell }, func() error {
		switch req.Action {
		case api.MemberAdd, api.MemberPromote, api.MemberRemove:
		default:
			return api.Errorf(api.CodeBadRequest, "member action %q: use add, promote or remove", req.Action)
		}
		if req.Lockd == 0 {
			return api.Errorf(api.CodeBadRequest, "name the lockd (its id)")
		}
		return nil
	}, func() time.Duration { return time.Minute }, func(cctx context.Context, c *cell.Cell) (any, error) {
		return s.host.ChangeMember(cctx, c, req)
	})
}

// transfer hands the named cell's leadership to its replica on another lockd.
func (s *Server) transfer(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.TransferRequest
	return s.onCell(ctx, &req, func() string { return req.Cell }, nil, nil, func(_ context.Context, c *cell.Cell) (any, error) {
		info, ok := s.host.Directory().Cell(req.Cell)
		if !ok {
			return nil, api.Errorf(api.CodeNotFound, "no cell %s", req.Cell)
		}
		for _, r := range info.Replicas {
			if r.Lockd == req.To && !r.Learner {
				return struct{}{}, c.TransferTo(r.ReplicaID)
			}
		}
		return nil, api.Errorf(api.CodeNotFound, "cell %s has no voting replica on lockd %d", req.Cell, req.To)
	})
}
