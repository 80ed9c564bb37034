package httpapi

// The session routes: open, KeepAlive (a client's and a lockproxy's
// batch), close.

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

func needSession(id uint64, what string) error {
	if id == 0 {
		return api.Errorf(api.CodeNoSession, "%s names no session", what)
	}
	return nil
}

func (s *Server) openSession(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.OpenSessionRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := api.CheckNonce(req.Nonce); err != nil {
		return nil, err
	}
	c, err := s.readyCell(ctx, req.Cell)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	return c.OpenSession(cctx, req, p.caller())
}

// keepAlive renews a client's session; its deadline covers the long poll.
func (s *Server) keepAlive(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.KeepAliveRequest
	if err := decodeWire(ctx, &req); err != nil {
		return nil, err
	}
	if err := needSession(req.Session, "keepalive"); err != nil {
		return nil, err
	}
	c, err := s.readyCell(ctx, req.Cell)
	if err != nil {
		return nil, err
	}
	if s.canPark(ctx) {
		// Its wait holds no worker (park.go); what comes before it (a
		// first renewal's confirmation) is bounded as any request.
		pk := s.newParked(ctx, ctx.Time())
		cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		resp, parked, err := c.KeepAliveAsync(cctx, req, s.renewCheck(p), pk.answer)
		if parked {
			pk.hijack(ctx)
			return parkedSentinel{}, nil
		}
		return resp, err
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxKeepAliveWait)
	cctx, cancel := context.WithTimeout(context.Background(), wait+RequestTimeout)
	defer cancel()
	return c.KeepAlive(cctx, req, s.renewCheck(p))
}

// keepAliveBatch renews a lockproxy's sessions on one cell (lockproxies
// run as admins).
func (s *Server) keepAliveBatch(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.KeepAliveBatchRequest
	if err := decodeWire(ctx, &req); err != nil {
		return nil, err
	}
	c, err := s.readyCell(ctx, req.Cell)
	if err != nil {
		return nil, err
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxBatchWait)
	cctx, cancel := context.WithTimeout(context.Background(), wait+RequestTimeout)
	defer cancel()
	return c.KeepAliveBatch(cctx, req, s.renewCheck(p))
}

func (s *Server) closeSession(ctx *fasthttp.RequestCtx, _ principal) (any, error) {
	var req api.CloseSessionRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := needSession(req.Session, "close"); err != nil {
		return nil, err
	}
	c, err := s.readyCell(ctx, req.Cell)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	return struct{}{}, c.CloseSession(cctx, req)
}
