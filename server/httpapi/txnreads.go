package httpapi

// A transaction's branch reads (api.TxnReads): checked as a ranges read
// is (RouteRanges: the read role on each root, the span under it, the
// limits), and all in the transaction's prefix, before anything is
// proposed: a refused read refuses the transaction.

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cell"
)

// txnReads checks req's branch reads for p; nil when it asks none.
func txnReads(p principal, req *api.TxnRequest) (*cell.TxnReads, error) {
	if req.Reads == nil {
		return nil, nil
	}
	prefix := api.Prefix(req.Then[0].Path) // CheckTxnShape: one write at least
	out := &cell.TxnReads{Then: req.Reads.Then, Else: req.Reads.Else}
	var err error
	if out.ThenLimits, err = branchReadLimits(p, "then", prefix, req.Reads.Then); err != nil {
		return nil, err
	}
	if out.ElseLimits, err = branchReadLimits(p, "else", prefix, req.Reads.Else); err != nil {
		return nil, err
	}
	return out, nil
}

// branchReadLimits checks one branch's reads (readLimits) and returns
// their clamped limits.
func branchReadLimits(p principal, branch, prefix string, reads []api.RangeRequest) ([]int, error) {
	if len(reads) > api.MaxRangesPerRead {
		return nil, api.Errorf(api.CodeBadRequest, "%d %s reads: a transaction's branch carries at most %d (MaxRangesPerRead)", len(reads), branch, api.MaxRangesPerRead)
	}
	return readLimits(p, branch+" read", "a transaction", prefix, reads)
}
