package cell

// Transactions: every path a transaction writes is fenced as its single
// write would fence it (cache.go), then the writes commit in one entry
// (server/fsm txn.go).

import (
	"context"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/fsm"
)

// Txn commits req's writes if its conditions hold. whos are the caller's
// ACL flags on each write's path (one per write: a tenant's grants differ
// per path); the entry's tenant, quota and admin flag are whos[0]'s. A
// refusal that names a condition or a write is an answer (Succeeded
// false), not an error: nothing applied. reads, if not nil, are answered
// with it (branchReads).
func (c *Cell) Txn(ctx context.Context, req api.TxnRequest, whos []Caller, reads *TxnReads) (api.TxnResponse, error) {
	resp, err := c.txn(ctx, req, whos)
	if err != nil {
		return resp, err
	}
	resp.Reads = c.branchReads(reads, &resp)
	return resp, nil
}

// TxnReads are a transaction's branch reads (api.TxnReads), each with
// its limit, clamped by the caller as for Ranges.
type TxnReads struct {
	Then, Else             []api.RangeRequest
	ThenLimits, ElseLimits []int
}

// branchReads answers the reads of the branch resp took from this
// replica's state right after the transaction applied here (the
// proposal returns once it has): a state at its index or later, the
// cell's own at that index's commit, which came after the request began
// and before now (a linearizable read with no ReadIndex). nil when the
// branch has none, a write failed, or the state cannot answer them (the
// prefix no longer served here, a bound): the caller reads them itself.
func (c *Cell) branchReads(r *TxnReads, resp *api.TxnResponse) *api.RangesResponse {
	reqs, limits := branchRead(r, resp)
	if len(reqs) == 0 {
		return nil
	}
	out, err := readLocal(c, rangesQuery{reqs: reqs, limits: limits}.run)
	if err != nil || out.Index < resp.Index {
		return nil
	}
	return &out
}

// branchRead is the reads of the branch resp took: Then when it
// applied, Else when a condition failed, none when a write failed.
func branchRead(r *TxnReads, resp *api.TxnResponse) ([]api.RangeRequest, []int) {
	switch {
	case r == nil:
		return nil, nil
	case resp.Succeeded || mutant.On(mutant.TxnReadsBranch):
		return r.Then, r.ThenLimits
	case resp.Failed != nil && resp.Failed.Kind == api.TxnFailedIf:
		return r.Else, r.ElseLimits
	}
	return nil, nil
}

// txn is Txn without its reads.
func (c *Cell) txn(ctx context.Context, req api.TxnRequest, whos []Caller) (api.TxnResponse, error) {
	need, what := fsm.TxnCodec(&req)
	if err := fsm.NeedCodec(c.LogCodec(), need, what); err != nil {
		return api.TxnResponse{}, err
	}
	if len(whos) != len(req.Then) || len(whos) == 0 {
		return api.TxnResponse{}, api.Errorf(api.CodeInternal, "txn: %d callers for %d writes", len(whos), len(req.Then))
	}
	done, err := c.beforeChangeOf(ctx, txnFencePaths(req.Then), true)
	if err != nil {
		return api.TxnResponse{}, err
	}
	res, err := c.propose(ctx, txnCommand(req, whos))
	done(err)
	// A write refused after its check (internal: a bug, writes before it
	// may have applied) is an error, never "nothing applied".
	if (res.FailedIf > 0 || res.FailedThen > 0) && (res.Err == nil || res.Err.Code != api.CodeInternal) {
		return api.TxnResponse{Index: res.Index, Failed: txnFailure(res), Epoch: res.Epoch}, nil
	}
	if err != nil {
		return api.TxnResponse{}, err
	}
	return api.TxnResponse{Succeeded: true, Index: res.Index, Nodes: res.TxnNodes, Epoch: res.Epoch}, nil
}

// txnCommand is the txn entry of req, each write with its caller's flags.
func txnCommand(req api.TxnRequest, whos []Caller) *fsm.Command {
	cmd := whos[0].stamp(&fsm.Command{Op: fsm.OpTxn, WriteHeader: req.WriteHeader, If: req.If})
	cmd.OwnOnly, cmd.ParentsFrom = false, "" // per write, below
	cmd.Then = make([]fsm.TxnOp, len(req.Then))
	for i, o := range req.Then {
		cmd.Then[i] = fsm.TxnOp{TxnOp: o, OwnOnly: whos[i].OwnOnly, ParentsFrom: whos[i].ParentsFrom}
	}
	return cmd
}

// txnFailure is a refused txn's answer: the condition or write it names.
func txnFailure(res fsm.Result) *api.TxnFailure {
	f := &api.TxnFailure{Kind: api.TxnFailedIf, Index: res.FailedIf - 1}
	if res.FailedThen > 0 {
		f.Kind, f.Index = api.TxnFailedThen, res.FailedThen-1
	}
	if res.Err != nil {
		f.Code, f.Message = res.Err.Code, res.Err.Message
	}
	return f
}

// txnFencePaths are the paths the writes' single writes would fence:
// a put's node and parent, a create's parent (with make_parents, every
// ancestor below the prefix root), a delete's node; each once.
func txnFencePaths(ops []api.TxnOp) []string {
	seen := make(map[string]bool, 2*len(ops))
	var paths []string
	add := func(p string) {
		if p != "/" && !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for _, o := range ops {
		if o.Op != api.TxnCreate {
			add(o.Path) // put, delete: the node itself
		}
		if o.Op == api.TxnDelete {
			continue
		}
		for p := api.Parent(o.Path); p != "/"; p = api.Parent(p) {
			add(p)
			if !o.MakeParents {
				break
			}
		}
	}
	return paths
}
