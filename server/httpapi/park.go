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
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// parkedWriteTimeout bounds the write of a parked KeepAlive's answer.
const parkedWriteTimeout = 10 * time.Second

// parkedMax bounds how long a connection stays parked without an answer
// (the session manager answers within the wait, at most
// api.MaxKeepAliveWait, and a ReadIndex round): a safety net, never the
// path a KeepAlive takes.
const parkedMax = api.MaxKeepAliveWait + 2*RequestTimeout

// maxPipelined bounds the bytes a client may have sent after a parked
// KeepAlive (HTTP pipelining): past it the connection is closed.
const maxPipelined = 64 << 10

// parkedSentinel is what a handler returns for a parked request: route
// writes nothing (the answer goes to the hijacked connection later).
type parkedSentinel struct{}

// ServeConns lets the server park KeepAlives: serve is the fasthttp
// server's ServeConn, which takes a parked connection back once its
// answer is written. The server must keep hijacked connections
// (fasthttp.Server.KeepHijackedConns). Without it, a KeepAlive waits in
// its worker as before.
func (s *Server) ServeConns(serve func(net.Conn) error) {
	s.parks.mu.Lock()
	defer s.parks.mu.Unlock()
	s.parks.serve = serve
	s.parks.idle, s.parks.done = make(chan net.Conn), make(chan struct{})
}

// Close closes the connections of parked KeepAlives (their clients retry
// elsewhere) and of idle ones (idle.go); a KeepAlive answered afterwards
// closes its connection.
func (s *Server) Close() {
	s.parks.mu.Lock()
	if !s.parks.closed && s.parks.done != nil {
		close(s.parks.done)
	}
	s.parks.closed = true
	for _, c := range s.parks.conns {
		_ = c.Close()
	}
	s.parks.conns = nil
	poller := s.parks.poller.Swap(nil) // no connection is parked from now
	s.parks.mu.Unlock()
	// Outside the lock: the poller's loop may be handing a connection
	// back (parks.woken), which takes it.
	if poller != nil {
		poller.close()
	}
}

// parks is the server's parked KeepAlives with a connection (at most one
// per session the leader holds: a newer KeepAlive answers the older), and
// the goroutines that serve answered ones again.
type parks struct {
	mu     sync.Mutex
	serve  func(net.Conn) error
	closed bool
	conns  map[*parked]net.Conn
	// idle hands a connection to a server goroutine waiting for one;
	// done ends those (Close).
	idle chan net.Conn
	done chan struct{}
	// poller holds connections idle between requests (idle.go), once
	// ParkIdleConns has made it, until Close; atomic for the request
	// path, which reads it without the lock.
	poller atomic.Pointer[idlePoller]
}

// canPark reports whether ctx's KeepAlive may be parked: the server can
// take its connection back, and it is a plain HTTP/1.1 request (a traced
// one is answered by its worker, with its Server-Timing).
func (s *Server) canPark(ctx *fasthttp.RequestCtx) bool {
	s.parks.mu.Lock()
	ok := s.parks.serve != nil && !s.parks.closed
	s.parks.mu.Unlock()
	return ok && ctx.Request.Header.IsHTTP11() && traceOf(ctx) == nil
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
	bare, err := bareConn(c)
	if err != nil {
		_ = c.Close()
		p.drop()
		return
	}
	// Recorded before it is published: an answer finishing it at once
	// then finds it to remove.
	if !p.s.parks.add(p, bare) {
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
	p.s.parks.remove(p)
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
	serve, ok := p.s.parks.remove(p)
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
	p.s.parks.serveAgain(c, serve)
}

// serveIdle is how long a goroutine that served a connection again waits
// for the next one before it ends.
const serveIdle = 10 * time.Second

// serveAgain serves c on an idle server goroutine, or a new one. A
// connection served again runs fasthttp's request loop until its next
// KeepAlive parks: a goroutine kept from the last one has the stack it
// needs, where a new one would grow (copy) its stack every time.
func (ps *parks) serveAgain(c net.Conn, serve func(net.Conn) error) {
	select {
	case ps.idle <- c:
	default:
		go ps.server(c, serve)
	}
}

// server serves connections given to it, until none comes for serveIdle
// or the server closes.
func (ps *parks) server(c net.Conn, serve func(net.Conn) error) {
	t := time.NewTimer(serveIdle)
	defer t.Stop()
	for {
		// Until the connection closes or parks again. fasthttp closes
		// it on every error but one.
		if err := serve(c); errors.Is(err, fasthttp.ErrPerIPConnLimit) {
			_ = c.Close()
		}
		t.Reset(serveIdle)
		select {
		case c = <-ps.idle:
		case <-t.C:
			return
		case <-ps.done:
			return
		}
	}
}

// add records p's connection c as parked, unless the server closed.
func (ps *parks) add(p *parked, c net.Conn) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return false
	}
	if ps.conns == nil {
		ps.conns = map[*parked]net.Conn{}
	}
	ps.conns[p] = c
	return true
}

// remove forgets p's connection; it returns how to serve it again, and
// false if the server closed.
func (ps *parks) remove(p *parked) (func(net.Conn) error, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.conns, p)
	return ps.serve, !ps.closed && ps.serve != nil
}

// bareConn is the connection under fasthttp's hijacked one, without the
// read buffer fasthttp keeps with it (4 KB a parked session). Bytes the
// client sent after the KeepAlive (pipelined) are taken out of that buffer
// first, with the connection's reads made to fail at once, and are read
// again before the connection's own.
func bareConn(c net.Conn) (net.Conn, error) {
	u, ok := c.(interface{ UnsafeConn() net.Conn })
	if !ok {
		return c, nil
	}
	raw := u.UnsafeConn()
	if err := raw.SetReadDeadline(time.Unix(1, 0)); err != nil {
		return nil, err
	}
	var pending []byte
	bp := probeBufs.Get().(*[]byte)
	defer probeBufs.Put(bp)
	buf := *bp
	for {
		n, err := c.Read(buf)
		pending = append(pending, buf[:n]...)
		if len(pending) > maxPipelined {
			return nil, errors.New("too much pipelined after a KeepAlive")
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if err := raw.SetReadDeadline(time.Time{}); err != nil {
		return nil, err
	}
	// A connection parked before with bytes pipelined: those were read
	// above, through it; one wrapper at most.
	switch w := raw.(type) {
	case *tlsPrefixConn:
		raw = w.Conn
	case *prefixConn:
		raw = w.Conn
	}
	if len(pending) == 0 {
		return raw, nil
	}
	pc := &prefixConn{Conn: raw, prefix: pending}
	if t, ok := raw.(tlsConn); ok {
		return &tlsPrefixConn{prefixConn: pc, t: t}, nil
	}
	return pc, nil
}

// tlsConn is what fasthttp asks of a connection to see its TLS state.
type tlsConn interface {
	Handshake() error
	ConnectionState() tls.ConnectionState
}

// probeBufs are the buffers bareConn reads pipelined bytes into (one per
// parked KeepAlive would be most of what the leader allocates for it).
var probeBufs = sync.Pool{New: func() any { b := make([]byte, 512); return &b }}

// prefixConn reads prefix before its connection. ci is what the idle
// poller's decision knows of it, as of at (idle.go).
type prefixConn struct {
	net.Conn
	prefix []byte
	ci     connIdle
	at     time.Time
}

func (c *prefixConn) pending() bool { return len(c.prefix) > 0 }

// mark sets what parkAfter is to know of c, its served counting from now.
func (c *prefixConn) mark(ci connIdle) { c.ci, c.at = ci, time.Now() }

func (c *prefixConn) idle(now time.Time) connIdle {
	ci := c.ci
	ci.served = now.Sub(c.at)
	return ci
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// tlsPrefixConn is a prefixConn over TLS: fasthttp finds its client
// certificate through ConnectionState.
type tlsPrefixConn struct {
	*prefixConn
	t tlsConn
}

func (c *tlsPrefixConn) Handshake() error                     { return c.t.Handshake() }
func (c *tlsPrefixConn) ConnectionState() tls.ConnectionState { return c.t.ConnectionState() }
