package httpapi

// The lock routes: a lock's state, its queue, a fencing token's check.

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

func (s *Server) lockState(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.LockStateRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := need(p, api.RoleRead, req.Path); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, req.Path, func(cctx context.Context) (any, error) { return c.LockState(cctx, req) })
}

// lockCheck answers whether a fencing token holds its lock now (the
// resource side of fencing, for resources that keep no high-water mark).
func (s *Server) lockCheck(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.LockCheckRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if req.Token == 0 {
		return nil, api.Errorf(api.CodeBadRequest, "lock check needs the token to check (a grant's fencing token, never 0)")
	}
	if err := need(p, api.RoleRead, req.Path); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, req.Path, func(cctx context.Context) (any, error) { return c.CheckLock(cctx, req) })
}

// lockQueue answers a lock's queue for the status page, which can reach
// only the lockd that served it: a lockd that does not lead the cell asks
// the one that does (at most a few hops; a forwarded request is not
// forwarded again), once the caller's read role is checked here.
func (s *Server) lockQueue(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.LockQueueRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := need(p, api.RoleRead, req.Path); err != nil {
		return nil, err
	}
	v, err := s.lockQueueHere(ctx, req.Path)
	code := api.CodeOf(err)
	if len(ctx.Request.Header.Peek(api.HeaderForwarded)) > 0 || (code != api.CodeNotLeader && code != api.CodeWrongCell) {
		return v, err
	}
	return s.forwardLockQueue(req, err)
}

// lockQueueHere reads path's lock queue on this lockd's replica of its cell.
func (s *Server) lockQueueHere(ctx *fasthttp.RequestCtx, path string) (any, error) {
	c, err := s.cellForPath(ctx, path)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, path, func(cctx context.Context) (any, error) { return c.LockQueue(cctx, path) })
}

// forwardLockQueue asks the lockd that leads req's cell (the leader err
// names, else the cell's first endpoint) and follows up to three
// not_leader answers; err is the answer when there is no one to ask.
func (s *Server) forwardLockQueue(req api.LockQueueRequest, err error) (any, error) {
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
