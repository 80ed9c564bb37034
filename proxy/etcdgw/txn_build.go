package etcdgw

import (
	"context"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// buildTxn is the api.TxnRequest of one attempt: the client's compares,
// then a pin per written key (the version read, or missing), and the
// writes, with the one lease session they need.
func (g *Gateway) buildTxn(ctx context.Context, w who, pl *txnPlan, reads []keyRead) (api.TxnRequest, error) {
	var req api.TxnRequest
	for _, c := range pl.compares {
		cond, err := condOf(c.cmp, c.key.Path, g.compareOwner(w, c.cmp, pl.prefix.Cell))
		if err != nil {
			return api.TxnRequest{}, err
		}
		req.If = append(req.If, cond)
	}
	lease, explicit, err := g.txnLease(pl, reads)
	if err != nil {
		return api.TxnRequest{}, err
	}
	if lease != 0 {
		hdr, err := g.leases.session(ctx, w, lease, pl.prefix)
		if err != nil && explicit {
			return api.TxnRequest{}, err
		}
		req.WriteHeader = hdr // implicit and not this credential's: the lockd decides
	}
	for i, wr := range pl.then {
		op, write, err := writeOp(wr, reads[i], req.Session)
		if err != nil {
			return api.TxnRequest{}, err
		}
		req.If = append(req.If, pinOf(wr.key.Path, reads[i]))
		if write {
			req.Then = append(req.Then, op)
		}
	}
	if len(req.If) > api.MaxTxnConds {
		return api.TxnRequest{}, status.Errorf(codes.ResourceExhausted,
			"a transaction's compares plus its written keys are %d, limit %d (api.MaxTxnConds: each written key is pinned to what the gateway read)", len(req.If), api.MaxTxnConds)
	}
	return req, nil
}

// compareOwner is the session a lease compare names on cell: 0 for
// lease 0, the caller's lease's session there, else noOwner.
func (g *Gateway) compareOwner(w who, c *pb.Compare, cell string) uint64 {
	if c.Target != pb.Compare_LEASE || c.GetLease() == 0 {
		return 0
	}
	l, err := g.leases.lookup(w, c.GetLease())
	if err != nil {
		return noOwner
	}
	g.leases.mu.Lock()
	defer g.leases.mu.Unlock()
	if s := l.sessions[cell]; s != nil {
		return s.ref.id
	}
	return noOwner
}

// txnLease is the one lease whose session the writes need (0: none):
// explicit when a put names it, else a written leased key's own.
func (g *Gateway) txnLease(pl *txnPlan, reads []keyRead) (int64, bool, error) {
	var lease int64
	explicit := false
	for i, wr := range pl.then {
		l, ex := int64(0), false
		switch {
		case wr.put != nil && wr.put.Lease != 0:
			l, ex = wr.put.Lease, true
		case reads[i].isKey() && reads[i].node.Ephemeral:
			l = g.leases.leaseOf(pl.prefix.Cell, reads[i].node.Owner)
		}
		if l == 0 {
			continue
		}
		if lease != 0 && l != lease {
			return 0, false, status.Error(codes.FailedPrecondition,
				"a transaction writes keys of two leases: here one transaction writes with one lease's session")
		}
		lease, explicit = l, explicit || ex
	}
	return lease, explicit, nil
}

// writeOp is one write as a transaction op (write false: a delete of a
// missing key, no write); session is the transaction's session.
func writeOp(wr txnWrite, rd keyRead, session uint64) (api.TxnOp, bool, error) {
	if wr.del != nil {
		return api.TxnOp{Op: api.TxnDelete, Path: wr.key.Path}, rd.isKey(), nil
	}
	r := wr.put
	if (r.IgnoreValue || r.IgnoreLease) && !rd.isKey() {
		return api.TxnOp{}, false, rpctypes.ErrGRPCKeyNotFound
	}
	value := r.Value
	if r.IgnoreValue {
		value = rd.node.Value
	}
	leased := r.Lease != 0 || (rd.isKey() && rd.node.Ephemeral)
	switch {
	case r.Lease != 0 && !rd.exists:
		return api.TxnOp{Op: api.TxnCreate, Path: wr.key.Path, Value: value, Ephemeral: true, MakeParents: true, Container: true}, true, nil
	case r.Lease != 0 && !rd.isKey():
		return api.TxnOp{}, false, status.Errorf(codes.FailedPrecondition,
			"key %q has keys below it (keys are paths here): a key with a lease cannot have keys below it", wr.key.Path)
	case leased && rd.node.Owner != session:
		return api.TxnOp{}, false, status.Errorf(codes.FailedPrecondition,
			"key %q is not this transaction's lease's (persistent, or another lease's): a key's lease is fixed when it is created here; delete it first (docs/etcd.md)", wr.key.Path)
	}
	return api.TxnOp{Op: api.TxnPut, Path: wr.key.Path, Value: value, MakeParents: true, Container: true, Uncontain: true}, true, nil
}

// pinOf is the condition that the key is as read.
func pinOf(path string, rd keyRead) api.TxnCond {
	if !rd.exists {
		return api.TxnCond{If: api.CondMissing, Path: path}
	}
	return api.TxnCond{If: api.CondVersion, Path: path, Version: rd.node.Version}
}
