package httpapi

// Idle keep-alive connections held without a goroutine or buffers.
// Between two requests fasthttp keeps a connection's goroutine, its 4 KB
// read buffer (kept while StreamRequestBody is on) and its request
// context: about 11.7 KB a connection (bench/RESULTS.md, Memory). A
// connection its client uses sparsely is taken from fasthttp after its
// answer (hijacked, as a parked KeepAlive's is) and held by the idle
// poller (idlepoll_linux.go): its descriptor in an epoll set that one
// goroutine watches. Once readable it is served by fasthttp again
// (parks.serveAgain); idle past the server's idle timeout it is closed,
// as fasthttp would close it. A busy connection stays in fasthttp's loop,
// where a request costs no hand-over.

import (
	"errors"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// idleParkGap is how far apart a connection's requests must come for it
// to be parked between them: on average since fasthttp began serving it,
// or, for the first request after it was parked, the time it was parked.
const idleParkGap = time.Second

// maxIdleParked bounds the connections the idle poller holds; past it a
// connection stays with fasthttp, which bounds its own
// (api.MaxConnectionsPerLockd).
const maxIdleParked = api.MaxConnectionsPerLockd

// ParkIdleConns parks connections idle between requests in the idle
// poller, closing one idle for timeout (the fasthttp server's
// IdleTimeout). It needs ServeConns first. On a system without the
// poller, or if it cannot be made, connections stay with fasthttp and
// the error says why.
func (s *Server) ParkIdleConns(timeout time.Duration) error {
	if timeout <= 0 {
		return errors.New("no idle timeout: a parked connection would be held for ever")
	}
	s.parks.mu.Lock()
	defer s.parks.mu.Unlock()
	if s.parks.serve == nil || s.parks.closed || s.parks.poller.Load() != nil {
		return nil
	}
	p, err := newIdlePoller(timeout, maxIdleParked, s.parks.woken)
	if err != nil {
		return err
	}
	s.parks.poller.Store(p)
	return nil
}

// connIdle is what the server knows of a connection's use when it
// decides whether to park it: whether the poller served it again
// (woken), how long it held it then (parked), how long ago (served); or
// that it must stay with fasthttp (noPark: the poller could not take it).
type connIdle struct {
	woken  bool
	parked time.Duration
	served time.Duration
	noPark bool
}

// parkAfter decides whether a connection is parked after the answer to
// the reqNum-th request fasthttp has served on it since it was accepted
// or served again: a new connection after its first (most clients that
// stop after one are done for a while); one served again after its
// first if the poller held it at least idleParkGap (a sparse client),
// after a later one if its requests came at least idleParkGap apart on
// average since. fasthttp's own connection time is not kept between
// requests (ReduceMemoryUsage), so a connection never parked has no
// history: it is parked only after its first request.
func parkAfter(reqNum uint64, ci connIdle) bool {
	switch {
	case ci.noPark:
		return false
	case !ci.woken:
		return reqNum <= 1
	case reqNum <= 1:
		return ci.parked >= idleParkGap
	default:
		return ci.served >= time.Duration(reqNum-1)*idleParkGap
	}
}

// parkIdle hands ctx's connection to the idle poller once its answer is
// written, if the poller runs and parkAfter says so. Only a connection
// whose request was read whole is parked (readWhole): bytes left on it
// would be taken for the next request.
func (s *Server) parkIdle(ctx *fasthttp.RequestCtx) {
	if s.parks.poller.Load() == nil || ctx.Hijacked() || !ctx.Request.Header.IsHTTP11() ||
		ctx.Request.Header.ConnectionClose() || ctx.Response.ConnectionClose() {
		return
	}
	if !readWhole(&ctx.Request) && !mutant.On(mutant.IdleParkUnread) {
		return
	}
	var ci connIdle
	if w, ok := ctx.Conn().(interface{ idle(now time.Time) connIdle }); ok {
		ci = w.idle(ctx.Time())
	}
	if !parkAfter(ctx.ConnRequestNum(), ci) {
		return
	}
	ctx.Hijack(s.parks.idleAttach)
}

// readWhole reports whether req's body is certainly read whole: it has
// none (no Content-Length and no Transfer-Encoding, -2 to fasthttp, is
// none in a request), or it was read into the request (httpbody.Read) to
// its announced length. A chunked body, or a stream closed or left
// unread, is not: however fasthttp was told to drop it, on a hijacked
// connection its rest would be read as the next request.
func readWhole(req *fasthttp.Request) bool {
	n := req.Header.ContentLength()
	return n == 0 || n == -2 || (n > 0 && !req.IsBodyStream() && len(req.Body()) == n)
}

// idleAttach takes a connection hijacked by parkIdle (in fasthttp's
// hijack goroutine): bytes its client already sent after the answer are
// served at once, else it goes to the poller, or back to fasthttp if the
// poller is full or closed.
func (ps *parks) idleAttach(c net.Conn) {
	bare, err := bareConn(c)
	if err != nil {
		_ = c.Close()
		return
	}
	ps.mu.Lock()
	serve, p, open := ps.serve, ps.poller.Load(), !ps.closed
	ps.mu.Unlock()
	if serve == nil {
		_ = bare.Close()
		return
	}
	// Bytes already sent: a busy client, served at once and left in
	// fasthttp's loop (woken, not parked) rather than handed over
	// again after each pipelined answer.
	if pc, ok := bare.(interface {
		pending() bool
		mark(connIdle)
	}); ok && pc.pending() {
		pc.mark(connIdle{woken: true})
		ps.serveAgain(bare, serve)
		return
	}
	// The poller full, or closing with the server: fasthttp keeps it
	// (its Shutdown closes it), never to be parked again.
	if !open || p == nil || !p.add(bare) {
		ps.serveAgain(wrapConn(bare, connIdle{noPark: true}), serve)
	}
}

// woken serves again a connection the poller found readable after
// parkedFor, marked so that parkAfter knows how long it was idle.
func (ps *parks) woken(c net.Conn, parkedFor time.Duration) {
	ps.mu.Lock()
	serve, open := ps.serve, !ps.closed
	ps.mu.Unlock()
	if !open || serve == nil {
		_ = c.Close()
		return
	}
	ps.serveAgain(wrapConn(c, connIdle{woken: true, parked: parkedFor}), serve)
}

// wrapConn is c (bare: no wrapper of park.go's) marked with what parkAfter
// is to know of it; served counts from now.
func wrapConn(c net.Conn, ci connIdle) net.Conn {
	pc := &prefixConn{Conn: c}
	pc.mark(ci)
	if t, ok := c.(tlsConn); ok {
		return &tlsPrefixConn{prefixConn: pc, t: t}
	}
	return pc
}

// idleHeld is how many connections the idle poller holds (0 without it).
func (ps *parks) idleHeld() int {
	if p := ps.poller.Load(); p != nil {
		return p.held()
	}
	return 0
}

// idleParks is how many times a connection was parked (0 without it).
func (ps *parks) idleParks() uint64 {
	if p := ps.poller.Load(); p != nil {
		return p.parks()
	}
	return 0
}
