package etcdgw

import (
	"context"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// A transaction that writes nothing (only reads, or deletes of keys
// that are not there) is decided and answered on one read of the cell
// (api.RouteRanges): its compares' keys, its writes' keys and both
// branches' reads at one index, as etcd serves a transaction at one
// revision. Read one at a time, a serializable STM's reads (its commit's
// else branch, which it takes for its next attempt's snapshot) could
// mix revisions and show it a state that never was.

// maxTxnSpans is the most spans one read-only transaction reads: its
// compares, its writes' keys and both branches' reads.
const maxTxnSpans = MaxTxnCompares + 2*(MaxTxnOps+MaxTxnReads)

// The ranges read carries them all.
var _ = [api.MaxRangesPerRead - maxTxnSpans]struct{}{}

// txnReadOnly decides and answers pl, whose writes (reads: what was
// read of their keys) write nothing, on one read; retry says a written
// key changed since it was read (a delete of a missing key would now
// delete one).
func (g *Gateway) txnReadOnly(ctx context.Context, w who, pl *txnPlan, reads []keyRead) (*pb.TxnResponse, bool, error) {
	success, err := g.planReads(pl.success)
	if err != nil {
		return nil, false, err
	}
	failure, err := g.planReads(pl.failure)
	if err != nil {
		return nil, false, err
	}
	reqs := make([]api.RangeRequest, 0, len(pl.compares)+len(pl.then)+len(success)+len(failure))
	for _, c := range pl.compares {
		reqs = append(reqs, spanRequest(keySpanOf(c.key), keyReadOpts))
	}
	for _, wr := range pl.then {
		reqs = append(reqs, spanRequest(keySpanOf(wr.key), keyReadOpts))
	}
	reqs = append(append(reqs, spanRequests(success)...), spanRequests(failure)...)
	resp, err := g.readTxnSpans(ctx, w, pl.prefix.Prefix, reqs)
	if err != nil {
		return nil, false, grpcError(err)
	}
	if len(reqs) > 0 {
		pl.prefix.Epoch = resp.Epoch
	}
	got := resp.Reads
	nc, nt := len(pl.compares), len(pl.then)
	for i, wr := range pl.then {
		if n, ok := nodeAt(got[nc+i], wr.key.Path); !samePin(reads[i], n, ok) {
			return nil, true, nil
		}
	}
	ok := true
	for i, c := range pl.compares {
		n, exists := nodeAt(got[i], c.key.Path)
		if !exists || n.Container {
			n = api.Node{}
		}
		if !evalCompare(c.cmp, &n, resp.Epoch, g.compareOwner(w, c.cmp, pl.prefix.Cell)) {
			ok = false
		}
	}
	rest := got[nc+nt:]
	b := txnBranch{ops: pl.success, rds: success, got: rest[:len(success)]}
	if !ok {
		b = txnBranch{ops: pl.failure, rds: failure, got: rest[len(success):]}
	}
	out, err := g.txnResponse(ctx, w, pl, b, reads, ok, resp.Index)
	return out, false, err
}

// readTxnSpans is readSpans (one read, one index).
func (g *Gateway) readTxnSpans(ctx context.Context, w who, prefix string, reqs []api.RangeRequest) (api.RangesResponse, error) {
	if !mutant.On(mutant.EtcdTxnSnapshot) {
		return g.readSpans(ctx, w, prefix, reqs)
	}
	var out api.RangesResponse // broken: each read alone, at its own index
	for _, r := range reqs {
		var one api.RangeResponse
		if err := g.be.Call(ctx, w.token, api.RouteRange, r, &one); err != nil {
			return out, err
		}
		out.Reads, out.Index, out.Epoch = append(out.Reads, one), max(out.Index, one.Index), one.Epoch
	}
	return out, nil
}

// samePin reports whether the node read again (n; exists) is the one
// read before (k): both missing, or the same node unchanged.
func samePin(k keyRead, n api.Node, exists bool) bool {
	if k.exists != exists {
		return false
	}
	return !exists || (k.node.CreateIndex == n.CreateIndex && k.node.ModifyIndex == n.ModifyIndex)
}
