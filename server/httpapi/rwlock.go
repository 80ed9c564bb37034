package httpapi

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// lockMode changes a lock node's mode in place (a downgrade or an
// upgrade): the lock role on the node, as for its create; the cell
// allows it for the node's own session only.
func (s *Server) lockMode(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.LockModeRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	role := api.RoleLock
	if p.allows(api.RoleWrite, req.Path) {
		role = api.RoleWrite
	}
	if err := need(p, role, req.Path); err != nil {
		return nil, err
	}
	if err := s.limitWrites(p); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	who := p.callerOn(role, req.Path)
	return s.untilServed(ctx, c, req.Path, func(cctx context.Context) (any, error) { return c.SetLockMode(cctx, req, who) })
}
