package connpark

// A request answered later without a goroutine. A Chubby-style
// KeepAlive is answered only near the lease's end or on an event, so a
// server holding ten thousand of them in fasthttp's workers would hold
// ten thousand stacks, read buffers and request contexts (about 28 KB of
// RSS each, bench/RESULTS.md, Memory). Parked, the request is a timer and
// a callback in its owner, and its connection is taken from fasthttp
// (hijacked) and held here, bare, until the answer is written to it; then
// fasthttp serves the connection again (ServeAgain). A lockd's
// KeepAlives and a lockproxy's clients' KeepAlives park so.

import (
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// ParkedWriteTimeout bounds the write of a parked request's answer.
const ParkedWriteTimeout = 10 * time.Second

// ConnClosed is the code a parked request ends with when its connection
// went (its client closed it, the server closed, or no answer came in
// time) before its answer was written.
const ConnClosed = "conn_closed"

// Parked is one parked request: its answer and its connection (set by
// the hijack), which come in either order.
type Parked struct {
	cs    *Conns
	close bool // the request asked for the connection to close
	// ended is told once how the request ended: the answer's code (its
	// write may still have failed), or ConnClosed.
	ended func(code string)

	mu       sync.Mutex
	conn     net.Conn           // set by the hijack
	resp     *fasthttp.Response // set by the answer
	code     string
	finished bool
	expire   *time.Timer // abandons it past the hijack's max
}

// NewParked is ctx's request, to be parked: call Hijack before the
// handler returns; Answer may come before or after. ended is told once
// how the request ended.
func (cs *Conns) NewParked(ctx *fasthttp.RequestCtx, ended func(code string)) *Parked {
	return &Parked{cs: cs, close: ctx.Request.Header.ConnectionClose(), ended: ended}
}

// CanPark reports whether ctx's request may be parked: cs takes
// connections (Serve, not yet Close), and it is a plain HTTP/1.1 request
// whose body was read whole (nothing of it is left to be read as the
// next request). ctx must be one fasthttp serves on a connection: a
// request served in process is never hijacked, so never answered.
func (cs *Conns) CanPark(ctx *fasthttp.RequestCtx) bool {
	return ctx.Request.Header.IsHTTP11() && readWhole(&ctx.Request) && cs.Ready()
}

// Hijack hands ctx's connection to p once the handler returns; fasthttp
// writes no response. If no answer has come within max (the owner's
// timer always answers sooner: a safety net), the connection is closed
// and abandoned is told.
func (p *Parked) Hijack(ctx *fasthttp.RequestCtx, max time.Duration, abandoned func()) {
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(p.attach)
	p.mu.Lock()
	p.expire = time.AfterFunc(max, func() { p.abandon(abandoned) })
	p.mu.Unlock()
}

// attach takes the hijacked connection (in fasthttp's hijack goroutine,
// which must return at once: it holds the request's context until then).
func (p *Parked) attach(c net.Conn) {
	bare, err := Bare(c)
	if err != nil {
		_ = c.Close()
		p.drop()
		return
	}
	// Recorded before it is published: an answer finishing it at once
	// then finds it to remove.
	if !p.cs.Hold(p, bare) {
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

// drop ends a parked request whose connection is gone: its answer goes
// nowhere.
func (p *Parked) drop() {
	p.mu.Lock()
	done := p.finished
	p.finished = true
	if p.expire != nil {
		p.expire.Stop()
	}
	p.mu.Unlock()
	if !done {
		p.ended(ConnClosed)
	}
}

// abandon closes the connection of a request not answered in time. It
// ends the request under the lock, so that an answer finishing at the
// same moment either writes and hands the connection back (and abandon
// does nothing) or finds it ended (and writes nothing).
func (p *Parked) abandon(abandoned func()) {
	p.mu.Lock()
	c, done := p.conn, p.finished
	p.finished = true
	p.mu.Unlock()
	if done {
		return
	}
	abandoned()
	p.ended(ConnClosed)
	p.cs.Release(p)
	if c != nil {
		_ = c.Close()
	}
}

// Answer is the request's response, code its outcome as the owner counts
// it; p owns resp from now (it releases it to fasthttp's pool once
// written). Only the first answer counts.
func (p *Parked) Answer(resp *fasthttp.Response, code string) {
	p.mu.Lock()
	if p.resp != nil || p.finished {
		p.mu.Unlock()
		fasthttp.ReleaseResponse(resp)
		return
	}
	p.resp, p.code = resp, code
	attached := p.conn != nil
	p.mu.Unlock()
	if attached {
		p.finish()
	}
}

// finish writes the answer to the connection, then gives the connection
// back to the server (or closes it), once.
func (p *Parked) finish() {
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
	serve, ok := p.cs.Release(p)
	if p.close {
		resp.SetConnectionClose()
	}
	err := c.SetWriteDeadline(time.Now().Add(ParkedWriteTimeout))
	if err == nil {
		_, err = resp.WriteTo(c)
	}
	if err == nil {
		err = c.SetWriteDeadline(time.Time{})
	}
	p.ended(code)
	if err != nil || !ok || p.close {
		_ = c.Close()
		return
	}
	p.cs.ServeAgain(c, serve)
}
