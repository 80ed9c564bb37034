package httpapi

// Finding the cell a request is for: its leader here, ready (held
// through a fail-over when the client allows), and running a request
// while the cell takes up the prefix.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/cell"
)

// cellForPath validates a path and returns the ready leader replica serving it.
func (s *Server) cellForPath(ctx *fasthttp.RequestCtx, path string) (*cell.Cell, error) {
	if err := api.ValidatePath(path); err != nil {
		return nil, err
	}
	if name := string(ctx.Request.Header.Peek(api.HeaderCell)); name != "" {
		return s.readyCell(ctx, name) // the client's routing; the cell's state has the last word
	}
	info, err := s.host.Directory().CellFor(path)
	if err != nil {
		return nil, err
	}
	return s.readyCell(ctx, info.Name)
}

func (s *Server) readyCell(ctx *fasthttp.RequestCtx, name string) (*cell.Cell, error) {
	if name == "" {
		return nil, api.Errorf(api.CodeBadRequest, "no cell named")
	}
	c, ok := s.host.Cell(name)
	if !ok {
		// The client knows a cell this lockd does not host, or its view
		// does not know (one just created, or moved by a restore or a
		// membership change, perhaps here): read the directory, which
		// starts the replicas it places here, and look again (refreshFor:
		// a few coalesced reads, briefly: the directory may be electing,
		// and a refusal now is better than a request held past its
		// client's patience).
		s.refreshFor(func() bool { c, ok = s.host.Cell(name); return ok })
	}
	if !ok {
		d := s.host.Directory() // one view: its cells and its index agree
		if info, known := d.Cell(name); known {
			// Not here: name a replica that is, as a leader hint (never
			// applied, so safe to resend), for a client whose view of the
			// cell's replicas is older than this lockd's.
			if hint := otherReplica(info, ctx.LocalAddr().String()); hint != "" && !mutant.On(mutant.NoHostHint) {
				return nil, &api.Error{Code: api.CodeNotLeader, Leader: hint,
					Message: fmt.Sprintf("cell %s is not hosted by this lockd; its replicas are at %v", name, info.Endpoints)}
			}
			return nil, api.Errorf(api.CodeWrongCell, "cell %s is not hosted by this lockd", name)
		}
		return nil, unknownCell(ctx, name, d.Index())
	}
	if err := waitUsable(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// unknownCell refuses a request naming a cell this lockd's view (at index
// view, read again already) does not list: wrong_cell, unless the client
// routed by a later directory (api.HeaderDirectoryIndex) — the cell was
// created after this view, whose next read will list it — then
// unavailable, not applied, for the client to send again.
func unknownCell(ctx *fasthttp.RequestCtx, name string, view uint64) error {
	if err := clientAhead(ctx, "cell "+name, view); err != nil {
		return err
	}
	return api.Errorf(api.CodeWrongCell, "no cell %s", name)
}

// clientAhead is the refusal of a request whose client routed by a later
// directory (api.HeaderDirectoryIndex) than this lockd's view at index
// view, which lacks what the client named: unavailable, not applied; a
// bad_request for a malformed index; nil when the client is not ahead.
func clientAhead(ctx *fasthttp.RequestCtx, what string, view uint64) error {
	client, err := api.ParseDirectoryIndex(ctx.Request.Header.Peek(api.HeaderDirectoryIndex))
	switch {
	case err != nil:
		return err
	case client > view && !mutant.On(mutant.ViewBehind):
		return api.ViewBehindError("lockd", what, view, client)
	}
	return nil
}

// otherReplica is the API address of one of the cell's voting replicas
// other than self ("" if none).
func otherReplica(info api.CellInfo, self string) string {
	for _, r := range info.Replicas {
		if !r.Learner && r.APIAddr != "" && r.APIAddr != self {
			return r.APIAddr
		}
	}
	for _, e := range info.Endpoints {
		if e != self {
			return e
		}
	}
	return ""
}

// unknownCellRefresh bounds the directory read a request naming a cell
// unknown to this lockd makes.
const unknownCellRefresh = time.Second

// waitUsable is c.Ready, or, when the client allows it (api.HeaderWaitLeaderMS),
// c.WaitUsable for up to that long: during a fail-over the request is held
// until this replica learns of a leader, not sent back to poll.
func waitUsable(ctx *fasthttp.RequestCtx, c *cell.Cell) error {
	err := c.Ready()
	if err == nil {
		return nil // the common case: no hold, no timer
	}
	hold := holdBudget(ctx)
	if hold <= 0 {
		return err
	}
	hctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	return c.WaitUsable(hctx, string(ctx.Request.Header.Peek(api.HeaderUnreachable)))
}

// untilServed runs op on c, the ready leader of path's cell, under
// RequestTimeout. While the cell's state refuses path's prefix as not
// served yet and this lockd's view of the directory gives the prefix to c
// (read once if it does not: the view may be behind), the request is held
// and op run again, within what the client allows (holdBudget).
func (s *Server) untilServed(ctx *fasthttp.RequestCtx, c *cell.Cell, path string, op func(context.Context) (any, error)) (any, error) {
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	if tr := traceOf(ctx); tr != nil {
		tr.Mark(cell.MarkOpStart)
		cctx = cell.WithTrace(cctx, tr)
	}
	var holdUntil time.Time // set at the first hold: most requests need none
	refreshed := false
	for attempt := 0; ; attempt++ {
		v, err := op(cctx)
		if notServedYet(err) && !refreshed && !s.incoming(c, path) {
			// Perhaps the view is behind the directory: read it once.
			refreshed = true
			s.dir.refresh(cctx)
		}
		if !notServedYet(err) || !s.incoming(c, path) {
			return v, err
		}
		// The directory gives the prefix to this cell, which does not
		// serve it yet: it was just assigned (the leader adopts it within
		// a few milliseconds), or a migration is bringing it here (served
		// once the move commits). The state refused the request outright,
		// so it is safe to run again: hold it, as a fail-over does.
		if attempt == 0 {
			holdUntil = time.Now().Add(holdBudget(ctx))
		}
		if time.Now().After(holdUntil) || attempt >= 500 {
			e := api.Errorf(api.CodeUnavailable, "cell %s is taking up prefix %s: retry", c.Info().Name, api.Prefix(path))
			e.NotApplied = true // every attempt was refused by the state
			return nil, e
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// notServedYet reports whether err is the cell's state refusing a request
// because it does not serve the prefix (yet): wrong_cell (never had it)
// or unavailable (a copy is arriving). Not moved: that is final here.
func notServedYet(err error) bool {
	if !cell.IsRefusal(err) {
		return false // Raft's errors: a timeout may still apply
	}
	code := api.CodeOf(err)
	return code == api.CodeWrongCell || code == api.CodeUnavailable
}

// incoming reports whether this lockd's directory view gives path's
// prefix to c, or is moving it there.
func (s *Server) incoming(c *cell.Cell, path string) bool {
	name := c.Info().Name
	pi, err := s.host.Directory().PrefixFor(path)
	return err == nil && (pi.Cell == name || pi.Migration != nil && pi.Migration.To == name)
}

// holdBudget is how long a request may be held: what the client allows
// (api.HeaderWaitLeaderMS), at most api.MaxLeaderWait.
func holdBudget(ctx *fasthttp.RequestCtx) time.Duration {
	ms, err := strconv.Atoi(string(ctx.Request.Header.Peek(api.HeaderWaitLeaderMS)))
	if err != nil || ms <= 0 {
		return 0
	}
	return min(time.Duration(ms)*time.Millisecond, api.MaxLeaderWait)
}
