package proxy

// A client's KeepAlive held without a goroutine. A client's KeepAlive is
// held until its session has events, its wait ends or a batch confirms
// it (keepalive.go), and an SDK sends the next at once: every session
// holds one nearly all the time. In fasthttp's worker each would hold a
// stack, a read buffer and a request context, about 30 KB (bench/
// RESULTS.md, Memory); parked, it is a timer and a callback in the cell's
// table, and its connection is taken from fasthttp (hijacked) and held,
// bare, in the proxy's connpark.Conns until the answer is written, as a
// lockd parks its own (server/httpapi/park.go).

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// kaParkedMax bounds how long a parked KeepAlive's connection waits for
// its answer: its table answers it by its wait's end (at most
// api.MaxKeepAliveWait) plus what its client allows an attempt (a sixth
// of its lease, at most api.MaxLease: kaClock.confirmBy), and a margin.
// A safety net, never the path a KeepAlive takes.
const kaParkedMax = api.MaxKeepAliveWait + api.MaxLease/6 + 10*time.Second

// clientKeepAlive answers a client's KeepAlive (onConn: served on the
// client's connection). One held is parked when it can be; else its
// worker waits.
func (p *Proxy) clientKeepAlive(ctx *fasthttp.RequestCtx, arrived time.Time, onConn bool) {
	t, req, err := p.admitKeepAlive(ctx)
	if err != nil {
		p.kaRefused(req, err)
		replyKeepAlive(ctx, api.SessionResponse{}, err)
		return
	}
	if !onConn || !p.cfg.ParkKeepAlives || !p.conns.CanPark(ctx) {
		resp, err := t.keepAlive(p.ctx, req, arrived)
		p.kaRefused(req, err)
		replyKeepAlive(ctx, resp, err)
		return
	}
	pk := p.conns.NewParked(ctx, func(string) {})
	wire := wireRequest(ctx)
	answer := func(resp api.SessionResponse, err error) {
		p.kaRefused(req, err)
		r := fasthttp.AcquireResponse()
		replyKeepAliveTo(r, wire, resp, err)
		pk.Answer(r, "")
	}
	resp, held, err := t.keepAliveAsync(p.ctx, req, arrived, answer)
	if !held {
		p.kaRefused(req, err)
		replyKeepAlive(ctx, resp, err)
		return
	}
	pk.Hijack(ctx, kaParkedMax, func() {
		p.log.Warn("parked KeepAlive unanswered; closing its connection", "cell", req.Cell, "session", req.Session, "after", kaParkedMax)
	})
}

// kaRefused logs a client's KeepAlive refused (err, if any).
func (p *Proxy) kaRefused(req api.KeepAliveRequest, err error) {
	if err != nil {
		p.log.Debug("client keepalive refused", "cell", req.Cell, "session", req.Session, "err", err)
	}
}

// parkedKeepAlives is how many clients' KeepAlives are parked now.
func (p *Proxy) parkedKeepAlives() int { return p.conns.Held() }
