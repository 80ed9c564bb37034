package httpapi

// The transaction route: a few writes on one cell, committed together if
// their conditions hold. Each write is authorized, rate-limited and
// bounded as it would be alone; each condition's path needs the read role
// (a condition reads its node: a tenant must not learn another's node
// version through one).

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cell"
)

func (s *Server) txn(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.TxnRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := api.CheckTxnShape(&req); err != nil {
		return nil, err
	}
	whos, err := s.txnCallers(p, &req)
	if err != nil {
		return nil, err
	}
	reads, err := txnReads(p, &req)
	if err != nil {
		return nil, err
	}
	for range req.Then {
		if err := s.limitWrites(p); err != nil {
			return nil, err
		}
	}
	if err := s.oneCell(req.Paths()); err != nil {
		return nil, err
	}
	first := req.Then[0].Path
	c, err := s.cellForPath(ctx, first)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, first, func(cctx context.Context) (any, error) { return c.Txn(cctx, req, whos, reads) })
}

// txnCallers authorizes every write as its single write (create: the
// write role, a txn makes no lock node; put and delete: writer) and every
// condition with the read role, and returns each write's caller.
func (s *Server) txnCallers(p principal, req *api.TxnRequest) ([]cell.Caller, error) {
	whos := make([]cell.Caller, len(req.Then))
	for i, o := range req.Then {
		if err := checkValue(o.Value); err != nil {
			return nil, err
		}
		if o.Op == api.TxnCreate {
			if err := need(p, api.RoleWrite, o.Path); err != nil {
				return nil, api.Errorf(api.CodeForbidden, "write %d: %v", i, err)
			}
			whos[i] = p.callerOn(api.RoleWrite, o.Path)
			continue
		}
		who, err := s.writer(p, o.Path, req.Session)
		if err != nil {
			return nil, api.Errorf(api.CodeForbidden, "write %d: %v", i, err)
		}
		whos[i] = who
	}
	for i, k := range req.If {
		if err := need(p, api.RoleRead, k.Path); err != nil {
			return nil, api.Errorf(api.CodeForbidden, "condition %d: %v", i, err)
		}
	}
	return whos, nil
}

// oneCell refuses a transaction whose paths lie on two cells (by this
// lockd's view of the directory; the cell's state checks it serves each).
func (s *Server) oneCell(paths []string) error {
	var name, at string
	for _, p := range paths {
		info, err := s.host.Directory().CellFor(p)
		if err != nil {
			return err
		}
		switch {
		case name == "":
			name, at = info.Name, p
		case info.Name != name:
			return api.Errorf(api.CodeBadRequest, "a transaction's paths lie on one cell: %s is on cell %s and %s on cell %s", at, name, p, info.Name)
		}
	}
	return nil
}
