package cell

import (
	"context"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// MaxExportPage bounds the nodes one export page returns (a page of 64 KiB
// values is then at most 64 MiB; lockctl asks for fewer).
const MaxExportPage = 1000

// PrefixOp runs one migration step on this cell (its leader): seal,
// export, stage, unseal or drop. Each is one committed entry (export: one
// linearizable read) and safe to repeat.
func (c *Cell) PrefixOp(ctx context.Context, req api.PrefixOpRequest) (api.PrefixOpResponse, error) {
	if err := c.stageGate(&req); err != nil { // rwlock.go
		return api.PrefixOpResponse{}, err
	}
	var cmd fsm.Command
	switch req.Op {
	case api.PrefixSeal:
		cmd = fsm.Command{Op: fsm.OpSealPrefix, Path: req.Prefix, Cell: req.To, DirIndex: req.DirIndex}
	case api.PrefixUnseal:
		cmd = fsm.Command{Op: fsm.OpUnsealPrefix, Path: req.Prefix, DirIndex: req.DirIndex, AtMS: time.Now().UnixMilli()}
	case api.PrefixStage:
		cmd = fsm.Command{Op: fsm.OpStagePrefix, Path: req.Prefix, Epoch: req.Epoch, First: req.First, Last: req.Last, Nodes: req.Nodes, DirIndex: req.Gen, Page: req.Page}
	case api.PrefixDrop:
		cmd = fsm.Command{Op: fsm.OpDropPrefix, Path: req.Prefix}
	case api.PrefixExport:
		limit := req.Limit
		if limit <= 0 || limit > MaxExportPage {
			limit = MaxExportPage
		}
		return read(ctx, c, exportQuery{prefix: req.Prefix, after: req.After, limit: limit}.run)
	case api.PrefixState:
		st, err := read(ctx, c, prefixQuery{prefix: req.Prefix}.run)
		if err != nil {
			return api.PrefixOpResponse{}, err
		}
		return api.PrefixOpResponse{Index: st.index, State: st.State, Epoch: st.Epoch}, nil
	default:
		return api.PrefixOpResponse{}, api.Errorf(api.CodeBadRequest, "unknown prefix op %q", req.Op)
	}
	done := func(error) {}
	if req.Op == api.PrefixSeal {
		// From the seal on the prefix is served by the new cell, whose
		// leader knows none of this one's cachers.
		var err error
		if done, err = c.beforeSeal(ctx, req.Prefix); err != nil {
			return api.PrefixOpResponse{}, err
		}
	}
	res, err := c.propose(ctx, &cmd)
	done(err)
	if err != nil {
		return api.PrefixOpResponse{}, err
	}
	st, err := readLocal(c, prefixQuery{prefix: req.Prefix}.run)
	out := api.PrefixOpResponse{Index: res.Index, Epoch: res.Epoch, Count: res.Count, Digest: res.Digest}
	if err == nil {
		out.State = st.State
	}
	return out, nil
}
