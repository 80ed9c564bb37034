// Package httpapi serves the client API of one lockd over fasthttp: JSON
// bodies, stable error codes, every node and session route answered by the
// cell's leader (a follower answers not_leader with the leader's address).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/server/cell"
)

// RequestTimeout bounds a proposal or read; past it the reply is
// unavailable and the client retries with the same request id.
const RequestTimeout = 5 * time.Second

// Server answers the API for the cells hosted by one lockd.
type Server struct {
	dir      *directory.Directory
	cells    map[string]*cell.Cell
	status   func() api.StatusResponse
	log      *slog.Logger
	metrics  fasthttp.RequestHandler
	requests *prometheus.HistogramVec
}

// New builds a server. status reports the process; reg receives the HTTP metrics.
func New(dir *directory.Directory, cells map[string]*cell.Cell, status func() api.StatusResponse, reg *prometheus.Registry, log *slog.Logger) *Server {
	s := &Server{dir: dir, cells: cells, status: status, log: log}
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
		s.requests.WithLabelValues(route, code).Observe(time.Since(start).Seconds())
	}
}

// route serves one request and returns the result code for metrics ("-" to
// skip recording, for unknown routes).
func (s *Server) route(ctx *fasthttp.RequestCtx, route string) string {
	switch route {
	case api.RouteHealth:
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetBodyString("ok\n")
		return "-"
	case api.RouteMetrics:
		s.metrics(ctx)
		return "-"
	case api.RouteStatus:
		return s.reply(ctx, s.status(), nil)
	case api.RouteDirectory:
		return s.reply(ctx, api.DirectoryResponse{Cells: s.dir.Cells()}, nil)
	}
	h, ok := postRoutes[route]
	if !ok {
		writeError(ctx, fasthttp.StatusNotFound, api.Errorf(api.CodeBadRequest, "no route %s", route))
		return "-"
	}
	if !ctx.IsPost() {
		return s.reply(ctx, nil, api.Errorf(api.CodeBadRequest, "%s takes POST", route))
	}
	v, err := h(s, ctx)
	return s.reply(ctx, v, err)
}

type handler func(s *Server, ctx *fasthttp.RequestCtx) (any, error)

var postRoutes map[string]handler

func init() {
	postRoutes = map[string]handler{
		api.RouteSessionOpen:      (*Server).openSession,
		api.RouteSessionKeepAlive: (*Server).keepAlive,
		api.RouteSessionClose:     (*Server).closeSession,
		api.RouteCreate:           (*Server).create,
		api.RoutePut:              (*Server).put,
		api.RouteDelete:           (*Server).delete,
		api.RouteGet:              (*Server).get,
		api.RouteChildren:         (*Server).children,
		api.RouteLockState:        (*Server).lockState,
		api.RouteWatch:            (*Server).watch,
	}
}

func (s *Server) reply(ctx *fasthttp.RequestCtx, v any, err error) string {
	ctx.SetContentType("application/json")
	if err != nil {
		var ae *api.Error
		if !errors.As(err, &ae) {
			ae = api.Errorf(api.CodeInternal, "%v", err)
		}
		if ae.Code == api.CodeInternal {
			s.log.Error("internal error", "route", string(ctx.Path()), "err", err)
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
func (s *Server) cellForPath(path string) (*cell.Cell, error) {
	if err := api.ValidatePath(path); err != nil {
		return nil, err
	}
	info, err := s.dir.CellFor(path)
	if err != nil {
		return nil, err
	}
	return s.readyCell(info.Name)
}

func (s *Server) readyCell(name string) (*cell.Cell, error) {
	c, ok := s.cells[name]
	if !ok {
		if name == "" {
			return nil, api.Errorf(api.CodeBadRequest, "no cell named")
		}
		if _, known := s.dir.Cell(name); known {
			return nil, api.Errorf(api.CodeWrongCell, "cell %s is not hosted by this lockd", name)
		}
		return nil, api.Errorf(api.CodeWrongCell, "no cell %s", name)
	}
	if err := c.Ready(); err != nil {
		return nil, err
	}
	return c, nil
}

func checkValue(v []byte) error {
	if len(v) > api.MaxValueSize {
		return api.Errorf(api.CodeValueTooLarge, "value is %d bytes, limit %d", len(v), api.MaxValueSize)
	}
	return nil
}

func timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), RequestTimeout)
}

func (s *Server) openSession(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.OpenSessionRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	c, err := s.readyCell(req.Cell)
	if err != nil {
		return nil, err
	}
	cctx, cancel := timeout()
	defer cancel()
	return c.OpenSession(cctx, req)
}

func (s *Server) keepAlive(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.KeepAliveRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if req.Session == 0 {
		return nil, api.Errorf(api.CodeNoSession, "keepalive names no session")
	}
	c, err := s.readyCell(req.Cell)
	if err != nil {
		return nil, err
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxKeepAliveWait)
	cctx, cancel := context.WithTimeout(context.Background(), wait+RequestTimeout)
	defer cancel()
	return c.KeepAlive(cctx, req)
}

func (s *Server) closeSession(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.CloseSessionRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if req.Session == 0 {
		return nil, api.Errorf(api.CodeNoSession, "close names no session")
	}
	c, err := s.readyCell(req.Cell)
	if err != nil {
		return nil, err
	}
	cctx, cancel := timeout()
	defer cancel()
	return struct{}{}, c.CloseSession(cctx, req)
}

func (s *Server) create(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.CreateRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := checkValue(req.Value); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(req.Path)
	if err != nil {
		return nil, err
	}
	cctx, cancel := timeout()
	defer cancel()
	return c.Create(cctx, req)
}

func (s *Server) put(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.PutRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := checkValue(req.Value); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(req.Path)
	if err != nil {
		return nil, err
	}
	cctx, cancel := timeout()
	defer cancel()
	return c.Put(cctx, req)
}

func (s *Server) delete(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.DeleteRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(req.Path)
	if err != nil {
		return nil, err
	}
	cctx, cancel := timeout()
	defer cancel()
	return c.Delete(cctx, req)
}

func (s *Server) readRequest(ctx *fasthttp.RequestCtx) (api.ReadRequest, *cell.Cell, error) {
	var req api.ReadRequest
	if err := decode(ctx, &req); err != nil {
		return req, nil, err
	}
	switch req.Watch {
	case "", api.WatchData, api.WatchChildren:
	default:
		return req, nil, api.Errorf(api.CodeBadRequest, "unknown watch kind %q", req.Watch)
	}
	c, err := s.cellForPath(req.Path)
	return req, c, err
}

func (s *Server) get(ctx *fasthttp.RequestCtx) (any, error) {
	req, c, err := s.readRequest(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := timeout()
	defer cancel()
	return c.Get(cctx, req)
}

func (s *Server) children(ctx *fasthttp.RequestCtx) (any, error) {
	req, c, err := s.readRequest(ctx)
	if err != nil {
		return nil, err
	}
	if req.Watch != "" && req.Watch != api.WatchChildren {
		return nil, api.Errorf(api.CodeBadRequest, "children takes watch %q", api.WatchChildren)
	}
	cctx, cancel := timeout()
	defer cancel()
	return c.Children(cctx, req)
}

func (s *Server) lockState(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.LockStateRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(req.Path)
	if err != nil {
		return nil, err
	}
	cctx, cancel := timeout()
	defer cancel()
	return c.LockState(cctx, req)
}

func (s *Server) watch(ctx *fasthttp.RequestCtx) (any, error) {
	var req api.WatchRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if len(req.Watches) > api.MaxWatchesPerCall {
		return nil, api.Errorf(api.CodeBadRequest, "%d watches, limit %d per call", len(req.Watches), api.MaxWatchesPerCall)
	}
	for _, w := range req.Watches {
		if err := api.ValidatePath(w.Path); err != nil {
			return nil, err
		}
		if w.Kind != api.WatchData && w.Kind != api.WatchChildren {
			return nil, api.Errorf(api.CodeBadRequest, "unknown watch kind %q", w.Kind)
		}
		if info, err := s.dir.CellFor(w.Path); err != nil || info.Name != req.Cell {
			return nil, api.Errorf(api.CodeWrongCell, "%s is not served by cell %s", w.Path, req.Cell)
		}
	}
	c, err := s.readyCell(req.Cell)
	if err != nil {
		return nil, err
	}
	cctx, cancel := timeout()
	defer cancel()
	return c.Watch(cctx, req)
}
