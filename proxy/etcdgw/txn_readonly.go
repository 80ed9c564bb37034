package etcdgw

import (
	"context"
	"errors"

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
// mix revisions and show it a state that never was. When both branches
// together are more than one read carries (api.RouteRanges' bounds, or
// the request body's), it is decided on its compares and written keys
// first, then read again with the taken branch: still one read, and a
// decision that changed in between is tried again. A branch too large
// for one read even alone is refused (ResourceExhausted): nothing was
// written, and reads at two indexes would not be one state.

// maxTxnSpans is the most spans one read-only transaction reads: its
// compares, its writes' keys and both branches' reads.
const maxTxnSpans = MaxTxnCompares + 2*(MaxTxnOps+MaxTxnReads)

// The ranges read carries them all.
var _ = [api.MaxRangesPerRead - maxTxnSpans]struct{}{}

// errOneReadTooBig: the reads would not fit one request body.
var errOneReadTooBig = api.Errorf(api.CodeLimitExceeded, "a transaction's keys and reads are more than one read of the cell carries (api.MaxRequestBody): read fewer, or shorter keys, at once")

// tooBigForOneRead reports whether err is a ranges read's refusal for
// its size (api.RouteRanges' bounds, or errOneReadTooBig).
func tooBigForOneRead(err error) bool {
	return errors.Is(err, errOneReadTooBig) || api.CodeOf(err) == api.CodeLimitExceeded
}

// txnReadOnly decides and answers pl, whose writes (reads: what was
// read of their keys) write nothing, on one read; retry says a written
// key changed since it was read (a delete of a missing key would now
// delete one), or, for a transaction read in two steps, the decision
// changed between them.
func (g *Gateway) txnReadOnly(ctx context.Context, w who, pl *txnPlan, reads []keyRead) (*pb.TxnResponse, bool, error) {
	success, err := g.planReads(pl.success)
	if err != nil {
		return nil, false, err
	}
	failure, err := g.planReads(pl.failure)
	if err != nil {
		return nil, false, err
	}
	pick := func(ok bool) ([]*pb.RequestOp, []rangeRead) {
		if ok {
			return pl.success, success
		}
		return pl.failure, failure
	}
	fixed := len(pl.compares) + len(pl.then)
	resp, err := g.readOnlyRead(ctx, w, pl, success, failure)
	var b txnBranch
	var ok bool
	switch {
	case err == nil:
		var retry bool
		if ok, retry = g.decide(w, pl, reads, resp); retry {
			return nil, true, nil
		}
		ops, rds := pick(ok)
		got := resp.Reads[fixed:]
		if !ok {
			got = got[len(success):]
		}
		b = txnBranch{ops: ops, rds: rds, got: got[:len(rds)]}
	case tooBigForOneRead(err):
		first, err := g.readOnlyRead(ctx, w, pl)
		if err != nil {
			return nil, false, grpcError(err)
		}
		var retry bool
		if ok, retry = g.decide(w, pl, reads, first); retry {
			return nil, true, nil
		}
		ops, rds := pick(ok)
		if resp, err = g.readOnlyRead(ctx, w, pl, rds); err != nil {
			return nil, false, grpcError(err) // too large even alone: refused, nothing written
		}
		if again, retry := g.decide(w, pl, reads, resp); retry || again != ok {
			return nil, true, nil
		}
		b = txnBranch{ops: ops, rds: rds, got: resp.Reads[fixed:]}
	default:
		return nil, false, grpcError(err)
	}
	if fixed+len(b.rds) > 0 {
		pl.prefix.Epoch = resp.Epoch
	}
	out, err := g.txnResponse(ctx, w, pl, b, reads, ok, resp.Index, true)
	return out, false, err
}

// readOnlyRead is one read of a read-only transaction: its compares'
// keys, its written keys, then the reads of branches, in that order.
func (g *Gateway) readOnlyRead(ctx context.Context, w who, pl *txnPlan, branches ...[]rangeRead) (api.RangesResponse, error) {
	reqs := make([]api.RangeRequest, 0, maxTxnSpans)
	for _, c := range pl.compares {
		reqs = append(reqs, spanRequest(keySpanOf(c.key), keyReadOpts))
	}
	for _, wr := range pl.then {
		reqs = append(reqs, spanRequest(keySpanOf(wr.key), keyReadOpts))
	}
	for _, b := range branches {
		reqs = append(reqs, spanRequests(b)...)
	}
	if rangesBody(pl.prefix.Prefix, reqs) > api.MaxRequestBody {
		return api.RangesResponse{}, errOneReadTooBig
	}
	return g.readTxnSpans(ctx, w, pl.prefix.Prefix, reqs)
}

// decide evaluates pl on resp (a readOnlyRead: compares' keys first,
// then written keys): ok whether the compares held; retry when they did
// and a written key is not as it was read (reads).
func (g *Gateway) decide(w who, pl *txnPlan, reads []keyRead, resp api.RangesResponse) (ok, retry bool) {
	ok = true
	for i, c := range pl.compares {
		n, exists := nodeAt(resp.Reads[i], c.key.Path)
		if !exists || n.Container {
			n = api.Node{}
		}
		if !evalCompare(c.cmp, &n, resp.Epoch, g.compareOwner(w, c.cmp, pl.prefix.Cell)) {
			ok = false
		}
	}
	if !ok {
		return false, false // the else branch writes nothing: the pins do not matter
	}
	nc := len(pl.compares)
	for i, wr := range pl.then {
		if n, exists := nodeAt(resp.Reads[nc+i], wr.key.Path); !samePin(reads[i], n, exists) {
			return true, true
		}
	}
	return true, false
}

// rangesBody is about the encoded size of a ranges read of reqs (JSON:
// each read's paths and field names), an over-estimate.
func rangesBody(root string, reqs []api.RangeRequest) int {
	n := jsonLen(root) + 32
	for _, r := range reqs {
		n += jsonLen(r.Root) + jsonLen(r.Start) + jsonLen(r.End) + 128
	}
	return n
}

// jsonLen is at least the length of s as a JSON string's contents:
// encoding/json escapes '<', '>', '&', quotes, backslashes and control
// characters in six bytes (\u003c) and may replace a byte of invalid
// UTF-8 with six; every other byte is one (a byte at or past 0x80 is
// counted six: an over-estimate).
func jsonLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '<' || c == '>' || c == '&' || c == '"' || c == '\\' {
			n += 5
		}
	}
	return n
}

// readTxnSpans is readSpans (one read, one index).
func (g *Gateway) readTxnSpans(ctx context.Context, w who, prefix string, reqs []api.RangeRequest) (api.RangesResponse, error) {
	if !mutant.On(mutant.EtcdTxnSnapshot) {
		return g.readSpans(ctx, w, prefix, reqs)
	}
	return g.readEach(ctx, w, reqs) // broken: each read alone, at its own index
}

// readEach reads every request alone, each at its own index (the
// answer's Index is the newest).
func (g *Gateway) readEach(ctx context.Context, w who, reqs []api.RangeRequest) (api.RangesResponse, error) {
	var out api.RangesResponse
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
