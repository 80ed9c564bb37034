package httpapi

// The node routes: create, put, delete, get, children, watch.

import (
	"context"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cell"
)

func checkValue(v []byte) error {
	if len(v) > api.MaxValueSize {
		return api.Errorf(api.CodeValueTooLarge, "value is %d bytes, limit %d", len(v), api.MaxValueSize)
	}
	return nil
}

// create creates a node. A lock node needs the lock role (or write); any
// other node the write role. With only the lock role, a tenant changes and
// deletes only its own sessions' ephemeral nodes (OwnOnly: the state
// machine checks).
func (s *Server) create(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.CreateRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	role := api.RoleWrite
	if req.Lock != api.LockNone && !p.allows(api.RoleWrite, req.Path) {
		role = api.RoleLock
	}
	if err := need(p, role, req.Path); err != nil {
		return nil, err
	}
	who := p.callerOn(role, req.Path)
	if err := firstErr(checkValue(req.Value), s.limitWrites(p)); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, req.Path, func(cctx context.Context) (any, error) { return c.Create(cctx, req, who) })
}

func (s *Server) put(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.PutRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	who, werr := s.writer(p, req.Path, req.Session)
	if err := firstErr(werr, checkValue(req.Value), s.limitWrites(p)); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, req.Path, func(cctx context.Context) (any, error) { return c.Put(cctx, req, who) })
}

func (s *Server) delete(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.DeleteRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	who, werr := s.writer(p, req.Path, req.Session)
	if err := firstErr(werr, s.limitWrites(p)); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, req.Path, func(cctx context.Context) (any, error) { return c.Delete(cctx, req, who) })
}

// writer authorizes a put or delete of path: the write role, or the lock
// role for the request's own session's ephemeral nodes only.
func (s *Server) writer(p principal, path string, session uint64) (cell.Caller, error) {
	if p.allows(api.RoleWrite, path) {
		return p.callerOn(api.RoleWrite, path), nil
	}
	if session != 0 && p.allows(api.RoleLock, path) {
		who := p.callerOn(api.RoleLock, path)
		who.OwnOnly = true
		return who, nil
	}
	return p.caller(), need(p, api.RoleWrite, path)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) get(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.ReadRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := firstErr(need(p, api.RoleRead, req.Path), api.CheckWatchKind(req.Watch, api.WatchData, api.WatchChildren), api.CheckCacheWindow(req.CacheWindowMS)); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, req.Path, func(cctx context.Context) (any, error) { return c.Get(cctx, req, s.grantCheck(p)) })
}

func (s *Server) children(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.ReadRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := firstErr(need(p, api.RoleRead, req.Path), api.CheckWatchKind(req.Watch, api.WatchChildren)); err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, req.Path, func(cctx context.Context) (any, error) { return c.Children(cctx, req) })
}

// watch re-arms a session's watches on one cell.
func (s *Server) watch(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.WatchRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := s.checkWatches(ctx, p, req); err != nil {
		return nil, err
	}
	c, err := s.readyCell(ctx, req.Cell)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	return c.Watch(cctx, req)
}

// checkWatches refuses a re-arm past api.MaxWatchesPerCall, or with a
// watch p may not read, of an unknown kind, or on a node req's cell does
// not serve in this lockd's view (watchCell).
func (s *Server) checkWatches(ctx *fasthttp.RequestCtx, p principal, req api.WatchRequest) error {
	if err := api.CheckWatchesPerCall(len(req.Watches)); err != nil {
		return err
	}
	for _, w := range req.Watches {
		if err := api.ValidatePath(w.Path); err != nil {
			return err
		}
		if err := need(p, api.RoleRead, w.Path); err != nil {
			return err
		}
		if w.Kind != api.WatchData && w.Kind != api.WatchChildren {
			return api.Errorf(api.CodeBadRequest, "unknown watch kind %q", w.Kind)
		}
		if err := s.watchCell(ctx, w.Path, req.Cell); err != nil {
			return err
		}
	}
	return nil
}

// watchCell refuses a watch on path unless this lockd's view gives its
// prefix to cell, read again once if it does not (a move committed a
// moment ago): wrong_cell, or, when the client routed by a later
// directory than the view (api.HeaderDirectoryIndex), unavailable and
// not applied, to be sent again.
func (s *Server) watchCell(ctx *fasthttp.RequestCtx, path, cell string) error {
	served := func() bool {
		info, err := s.host.Directory().CellFor(path)
		return err == nil && info.Name == cell
	}
	if served() || s.refreshFor(served) {
		return nil
	}
	if err := clientAhead(ctx, fmt.Sprintf("%s on cell %s", path, cell), s.host.Directory().Index()); err != nil {
		return err
	}
	return api.Errorf(api.CodeWrongCell, "%s is not served by cell %s", path, cell)
}
