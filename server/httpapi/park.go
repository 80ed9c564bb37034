package httpapi

// A client's KeepAlive parked without a goroutine. A Chubby-style
// KeepAlive is answered only near the lease's end or on an event, so a
// leader holding ten thousand sessions straight (no proxy) would hold ten
// thousand fasthttp workers: a stack, a read buffer and a request context
// each, about 28 KB of RSS per session (bench/RESULTS.md, Memory). Parked,
// the call is a timer and a callback in the session manager
// (session.RenewAsync), and its connection is taken from fasthttp
// (hijacked) and held here, bare, until the answer is written to it; then
// fasthttp serves the connection again (ServeConns).

import (
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/connpark"
)

// parkedWriteTimeout bounds the write of a parked KeepAlive's answer.
const parkedWriteTimeout = 10 * time.Second

// parkedMax bounds how long a connection stays parked without an answer
// (the session manager answers within the wait, at most
// api.MaxKeepAliveWait, and a ReadIndex round): a safety net, never the
// path a KeepAlive takes.
const parkedMax = api.MaxKeepAliveWait + 2*RequestTimeout

// parkedSentinel is what a handler returns for a parked request: route
// writes nothing (the answer goes to the hijacked connection later).
type parkedSentinel struct{}

// ServeConns lets the server park KeepAlives: serve is the fasthttp
// server's ServeConn, which takes a parked connection back once its
// answer is written. The server must keep hijacked connections
// (fasthttp.Server.KeepHijackedConns). Without it, a KeepAlive waits in
// its worker as before.
func (s *Server) ServeConns(serve func(net.Conn) error) { s.parks.Serve(serve) }

// ParkIdleConns parks connections idle between requests
// (connpark.Conns.ParkIdle), at most api.MaxConnectionsPerLockd (the
// lockd's connection bound), closing one idle for timeout (the fasthttp
// server's IdleTimeout). It needs ServeConns first.
func (s *Server) ParkIdleConns(timeout time.Duration) error {
	return s.parks.ParkIdle(timeout, api.MaxConnectionsPerLockd)
}

// Close closes the connections of parked KeepAlives (their clients retry
// elsewhere) and of idle ones; a KeepAlive answered afterwards closes its
// connection. Then the fasthttp server's Shutdown, then CloseServing.
func (s *Server) Close() { s.parks.Close() }

// CloseServing closes the connections handed back to fasthttp that it
// still serves (connpark.Conns.CloseServing): after its Shutdown.
func (s *Server) CloseServing() { s.parks.CloseServing() }

// canPark reports whether ctx's KeepAlive may be parked: the server can
// take its connection back, and it is a plain HTTP/1.1 request (a traced
// one is answered by its worker, with its Server-Timing).
func (s *Server) canPark(ctx *fasthttp.RequestCtx) bool {
	return s.parks.Ready() && ctx.Request.Header.IsHTTP11() && traceOf(ctx) == nil
}

// parked is one parked KeepAlive: the facts to answer it, then its
// connection (hijacked) and its answer, in either order.
type parked struct {
	s        *Server
	f        facts
	start    time.Time
	close    bool // the request asked for the connection to close
	mu       sync.Mutex
	conn     net.Conn           // set by the hijack
	resp     *fasthttp.Response // set by the answer
	code     string
	finished bool
	expire   *time.Timer // abandons it past parkedMax
}

func (s *Server) newParked(ctx *fasthttp.RequestCtx, start time.Time) *parked {
	return &parked{s: s, f: requestFacts(ctx), start: start, close: ctx.Request.Header.ConnectionClose()}
}

// hijack hands ctx's connection to p once the handler returns; fasthttp
// writes no response. If no answer has come within parkedMax (the
// session manager's timer always answers sooner), the connection is
// closed.
func (p *parked) hijack(ctx *fasthttp.RequestCtx) {
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) { p.attach(c) })
	p.mu.Lock()
	p.expire = time.AfterFunc(parkedMax, p.abandon)
	p.mu.Unlock()
}

// attach takes the hijacked connection (in fasthttp's hijack goroutine,
// which must return at once: it holds the request's context until then).
func (p *parked) attach(c net.Conn) {
	bare, err := connpark.Bare(c)
	if err != nil {
		_ = c.Close()
		p.drop()
		return
	}
	// Recorded before it is published: an answer finishing it at once
	// then finds it to remove.
	if !p.s.parks.Hold(p, bare) {
		_ = bare.Close()
		p.drop()
		return
	}
	p.mu.Lock()
	p.conn = bare
	ready := p.resp != nil
	p.mu.Unlock()
	if ready {
		go p.finish()
	}
}

// drop ends a parked KeepAlive whose connection is gone (the client
// closed it, or the server closed): its answer goes nowhere.
func (p *parked) drop() {
	p.mu.Lock()
	done := p.finished
	p.finished = true
	p.mu.Unlock()
	if !done {
		p.s.requests.WithLabelValues(api.RouteSessionKeepAlive, "conn_closed").Observe(time.Since(p.start).Seconds())
	}
}

// abandon closes the connection of a KeepAlive not answered within
// parkedMax.
func (p *parked) abandon() {
	p.mu.Lock()
	c, done := p.conn, p.finished
	p.mu.Unlock()
	if done {
		return
	}
	p.s.log.Warn("parked KeepAlive unanswered; closing its connection", "client", p.f.client, "after", parkedMax)
	p.drop()
	p.s.parks.Release(p)
	if c != nil {
		_ = c.Close()
	}
}

// answer is the KeepAlive's reply (from the session manager's wake-up, in
// a goroutine of its own).
func (p *parked) answer(v api.SessionResponse, err error) {
	resp := fasthttp.AcquireResponse()
	var code string
	if err != nil {
		code = p.s.replyTo(resp, p.f, nil, err)
	} else {
		code = p.s.replyTo(resp, p.f, v, nil)
	}
	p.mu.Lock()
	p.resp, p.code = resp, code
	attached := p.conn != nil
	p.mu.Unlock()
	if attached {
		p.finish()
	}
}

// finish writes the answer to the connection, then gives the connection
// back to the server (or closes it), once.
func (p *parked) finish() {
	p.mu.Lock()
	if p.finished || p.conn == nil || p.resp == nil {
		p.mu.Unlock()
		return
	}
	p.finished = true
	c, resp, code := p.conn, p.resp, p.code
	if p.expire != nil {
		p.expire.Stop()
	}
	p.mu.Unlock()
	defer fasthttp.ReleaseResponse(resp)
	serve, ok := p.s.parks.Release(p)
	if p.close {
		resp.SetConnectionClose()
	}
	err := c.SetWriteDeadline(time.Now().Add(parkedWriteTimeout))
	if err == nil {
		_, err = resp.WriteTo(c)
	}
	if err == nil {
		err = c.SetWriteDeadline(time.Time{})
	}
	p.s.requests.WithLabelValues(api.RouteSessionKeepAlive, code).Observe(time.Since(p.start).Seconds())
	if err != nil || !ok || p.close {
		_ = c.Close()
		return
	}
	p.s.parks.ServeAgain(c, serve)
}
