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
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/connpark"
)

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
// take its connection back, and it is a plain HTTP/1.1 request
// (connpark.Conns.CanPark; a traced one is answered by its worker, with
// its Server-Timing).
func (s *Server) canPark(ctx *fasthttp.RequestCtx) bool {
	return s.parks.CanPark(ctx) && traceOf(ctx) == nil
}

// parked is one parked KeepAlive (connpark.Parked) with what its answer
// and its count need.
type parked struct {
	s     *Server
	f     facts
	start time.Time
	p     *connpark.Parked
}

func (s *Server) newParked(ctx *fasthttp.RequestCtx, start time.Time) *parked {
	pk := &parked{s: s, f: requestFacts(ctx), start: start}
	pk.p = s.parks.NewParked(ctx, pk.ended)
	return pk
}

// hijack hands ctx's connection to the parked KeepAlive once the handler
// returns. If no answer has come within parkedMax (the session manager's
// timer always answers sooner), the connection is closed.
func (pk *parked) hijack(ctx *fasthttp.RequestCtx) {
	pk.p.Hijack(ctx, parkedMax, func() {
		pk.s.log.Warn("parked KeepAlive unanswered; closing its connection", "client", pk.f.client, "after", parkedMax)
	})
}

// ended counts the KeepAlive once it ended: answered (code), or its
// connection gone first.
func (pk *parked) ended(code string) {
	pk.s.requests.WithLabelValues(api.RouteSessionKeepAlive, code).Observe(time.Since(pk.start).Seconds())
}

// answer is the KeepAlive's reply (from the session manager's wake-up, in
// a goroutine of its own).
func (pk *parked) answer(v api.SessionResponse, err error) {
	resp := fasthttp.AcquireResponse()
	var code string
	if err != nil {
		code = pk.s.replyTo(resp, pk.f, nil, err)
	} else {
		code = pk.s.replyTo(resp, pk.f, v, nil)
	}
	pk.p.Answer(resp, code)
}
