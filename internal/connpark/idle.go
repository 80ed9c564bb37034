package connpark

// Idle keep-alive connections held without a goroutine or buffers.
// Between two requests fasthttp keeps a connection's goroutine, its 4 KB
// read buffer (kept while StreamRequestBody is on) and its request
// context: about 11.7 KB a connection (bench/RESULTS.md, Memory). A
// connection its client uses sparsely is taken from fasthttp after its
// answer (hijacked, as a parked KeepAlive's is) and held by the idle
// poller (idlepoll_linux.go): its descriptor in an epoll set that one
// goroutine watches. Once readable it is served by fasthttp again
// (Conns.ServeAgain); idle past the server's idle timeout it is closed,
// as fasthttp would close it. A busy connection stays in fasthttp's loop,
// where a request costs no hand-over.

import (
	"errors"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/internal/mutant"
)

// IdleGap is how long a client must have left its connection silent
// before a request for the connection to be parked after it: since its
// last answer, or, for the first request after it was parked, the time
// it was parked. A park and a wake-up cost the server tens of
// microseconds of CPU; a connection that pauses less is likely to speak
// again soon. At 1 s, lockbench's proxy case (10 000 sessions renewing
// every 4 s over 3 600 connections, in waves) parked a connection on
// 0.7 of its KeepAlives and took 15 % more proxy CPU for no less memory
// at its peak; at 5 s it took the CPU it took unparked
// (bench/RESULTS.md, Memory, "A lockproxy's idle connections").
const IdleGap = 5 * time.Second

// ParkIdle parks connections idle between requests in the idle poller,
// at most max of them (past it a connection stays with fasthttp: the
// server's connection bound), closing one idle for timeout (the fasthttp
// server's IdleTimeout). It needs Serve first. On a system without the
// poller, or if it cannot be made, connections stay with fasthttp and
// the error says why.
func (cs *Conns) ParkIdle(timeout time.Duration, max int) error {
	if timeout <= 0 {
		return errors.New("no idle timeout: a parked connection would be held for ever")
	}
	if max <= 0 {
		return errors.New("no bound on the idle connections parked")
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.serve == nil || cs.closed || cs.poller.Load() != nil {
		return nil
	}
	p, err := newIdlePoller(timeout, max, cs.woken)
	if err != nil {
		return err
	}
	cs.poller.Store(p)
	return nil
}

// connIdle is what the server knows of a connection's use when it
// decides whether to park it: whether the poller served it again
// (woken), how long it held it then (parked), how long its client was
// silent before the request just answered (gap: from the end of the
// answer before it to the request's arrival; 0 if there was none since
// it was woken); or that it must stay with fasthttp (noPark: the poller
// could not take it).
type connIdle struct {
	woken  bool
	parked time.Duration
	gap    time.Duration
	noPark bool
}

// parkAfter decides whether a connection is parked after the answer to
// the reqNum-th request fasthttp has served on it since it was accepted
// or served again: a new connection after its first (most clients that
// stop after one are done for a while); one served again after its
// first if the poller held it at least IdleGap (a sparse client),
// after a later one if its client was silent at least IdleGap
// before it (the last pause foretells the next). A client that sends its
// next request as soon as it has an answer (a long poll: a KeepAlive
// held until its lease needs renewing) is not parked however long each
// request is held, nor is a busy one: a hand-over per request would cost
// more than the goroutine it saves. fasthttp keeps no connection history
// between requests (ReduceMemoryUsage), so a connection never parked
// has none: it is parked only after its first request.
func parkAfter(reqNum uint64, ci connIdle) bool {
	switch {
	case ci.noPark:
		return false
	case !ci.woken:
		return reqNum <= 1
	case reqNum <= 1:
		return ci.parked >= IdleGap
	default:
		return ci.gap >= IdleGap
	}
}

// ParkIfIdle hands ctx's connection to the idle poller once its answer
// is written, if the poller runs and parkAfter says so: a handler calls
// it last. Only a connection whose request was read whole is parked
// (readWhole): bytes left on it would be taken for the next request.
func (cs *Conns) ParkIfIdle(ctx *fasthttp.RequestCtx) {
	if cs.poller.Load() == nil || ctx.Hijacked() || !ctx.Request.Header.IsHTTP11() ||
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
	ctx.Hijack(cs.idleAttach)
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

// idleAttach takes a connection hijacked by ParkIfIdle (in fasthttp's
// hijack goroutine): bytes its client already sent after the answer are
// served at once, else it goes to the poller, or back to fasthttp if the
// poller is full or closed.
func (cs *Conns) idleAttach(c net.Conn) {
	bare, err := Bare(c)
	if err != nil {
		_ = c.Close()
		return
	}
	cs.mu.Lock()
	serve, p, open := cs.serve, cs.poller.Load(), !cs.closed
	cs.mu.Unlock()
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
		cs.ServeAgain(bare, serve)
		return
	}
	// The poller full, or closing with the server: fasthttp keeps it
	// (its Shutdown closes it), never to be parked again.
	if !open || p == nil || !p.add(bare) {
		cs.ServeAgain(wrapConn(bare, connIdle{noPark: true}), serve)
	}
}

// woken serves again a connection the poller found readable after
// parkedFor, marked so that parkAfter knows how long it was idle.
func (cs *Conns) woken(c net.Conn, parkedFor time.Duration) {
	cs.mu.Lock()
	serve, open := cs.serve, !cs.closed
	cs.mu.Unlock()
	if !open || serve == nil {
		_ = c.Close()
		return
	}
	cs.ServeAgain(wrapConn(c, connIdle{woken: true, parked: parkedFor}), serve)
}

// wrapConn is c (bare: no wrapper of bare.go's) marked with what parkAfter
// is to know of it.
func wrapConn(c net.Conn, ci connIdle) net.Conn {
	pc := &prefixConn{Conn: c}
	pc.mark(ci)
	if t, ok := c.(tlsConn); ok {
		return &tlsPrefixConn{prefixConn: pc, t: t}
	}
	return pc
}

// IdleHeld is how many connections the idle poller holds (0 without it).
func (cs *Conns) IdleHeld() int {
	if p := cs.poller.Load(); p != nil {
		return p.held()
	}
	return 0
}

// IdleParks is how many times a connection was parked (0 without the
// poller; after Close, as many as before it).
func (cs *Conns) IdleParks() uint64 {
	if p := cs.poller.Load(); p != nil {
		return p.parks()
	}
	return cs.parksAtClose.Load()
}

// IdleParking reports whether the idle poller runs (ParkIdle made it, and
// Close has not ended it).
func (cs *Conns) IdleParking() bool { return cs.poller.Load() != nil }
