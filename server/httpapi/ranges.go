package httpapi

import (
	"context"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// Ranges and the change feed (api.RouteRange, api.RouteChanges): reads
// of a subtree the caller may read whole. Each names its Root; the
// caller needs the read role on it, and the range may not leave it: an
// answer is never filtered by grants.

// checkUnder refuses a span [start, end) (end "": the one path start)
// that is not all at or under root, whose read p may not do.
func checkUnder(p principal, root, start, end string) error {
	if err := api.ValidatePath(root); err != nil {
		return err
	}
	if !mutant.On(mutant.RangeACL) {
		if err := need(p, api.RoleRead, root); err != nil {
			return err
		}
	}
	if start != root && !strings.HasPrefix(start, root+"/") && !(root == "/" && strings.HasPrefix(start, "/")) {
		return api.Errorf(api.CodeBadRequest, "range start %q is not at or under root %s: a range stays in the subtree it reads", start, root)
	}
	if top := subtreeTop(root); end != "" && end > top {
		return api.Errorf(api.CodeBadRequest, "range end %q passes root %s's subtree (it ends before %q): a range stays in the subtree it reads", end, root, top)
	}
	return nil
}

// subtreeTop is the first string after every path at or under root
// ('0' follows '/').
func subtreeTop(root string) string {
	if root == "/" {
		return "0"
	}
	return root + "0"
}

// clampLimit is n within 1..bound (0: bound); negative is refused.
func clampLimit(what string, n, bound int) (int, error) {
	if n < 0 {
		return 0, api.Errorf(api.CodeBadRequest, "%s %d is negative", what, n)
	}
	if n == 0 || n > bound {
		return bound, nil
	}
	return n, nil
}

func (s *Server) rangeRead(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.RangeRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := checkUnder(p, req.Root, req.Start, req.End); err != nil {
		return nil, err
	}
	limit, err := clampLimit("limit", req.Limit, api.MaxRangeKeys)
	if err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Root)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, req.Root, func(cctx context.Context) (any, error) { return c.Range(cctx, req, limit) })
}

// readLimits checks reads as one read of the state (the ranges of a
// ranges read, a transaction's branch reads): each as checkUnder, each
// in prefix; and returns their limits, clamped. what names a read in a
// refusal ("read", "then read"), of the request it is part of.
func readLimits(p principal, what, of, prefix string, reads []api.RangeRequest) ([]int, error) {
	limits := make([]int, len(reads))
	for i, r := range reads {
		if err := checkUnder(p, r.Root, r.Start, r.End); err != nil {
			return nil, api.Errorf(api.CodeOf(err), "%s %d: %v", what, i, err)
		}
		if api.Prefix(r.Root) != prefix {
			return nil, api.Errorf(api.CodeBadRequest, "%s %d's root %s is not in prefix %s: the reads of %s are of one prefix", what, i, r.Root, prefix, of)
		}
		var err error
		if limits[i], err = clampLimit("limit", r.Limit, api.MaxRangeKeys); err != nil {
			return nil, err
		}
	}
	return limits, nil
}

// rangesRead reads several ranges of one prefix at one index (an etcd
// transaction's compares and reads): each checked as rangeRead checks
// one, all refused if one is.
func (s *Server) rangesRead(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.RangesRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := api.ValidatePath(req.Root); err != nil {
		return nil, err
	}
	if len(req.Reads) == 0 || len(req.Reads) > api.MaxRangesPerRead {
		return nil, api.Errorf(api.CodeBadRequest, "%d reads: a ranges read carries 1 to %d (MaxRangesPerRead)", len(req.Reads), api.MaxRangesPerRead)
	}
	limits, err := readLimits(p, "read", "a ranges read", api.Prefix(req.Root), req.Reads)
	if err != nil {
		return nil, err
	}
	c, err := s.cellForPath(ctx, req.Root)
	if err != nil {
		return nil, err
	}
	return s.untilServed(ctx, c, req.Root, func(cctx context.Context) (any, error) { return c.Ranges(cctx, req.Reads, limits) })
}

func (s *Server) changesRead(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	var req api.ChangesRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := checkUnder(p, req.Root, req.Root, ""); err != nil {
		return nil, err
	}
	limit, err := clampLimit("limit", req.Limit, api.MaxChangesPerRead)
	if err != nil {
		return nil, err
	}
	if req.WaitMS < 0 {
		return nil, api.Errorf(api.CodeBadRequest, "wait_ms %d is negative", req.WaitMS)
	}
	wait := time.Duration(min(req.WaitMS, api.MaxChangesWaitMS)) * time.Millisecond
	c, err := s.cellForPath(ctx, req.Root)
	if err != nil {
		return nil, err
	}
	// A held read outlives RequestTimeout by its wait.
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout+wait)
	defer cancel()
	return c.Changes(cctx, req, limit, wait)
}
