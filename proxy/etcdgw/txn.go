package etcdgw

import (
	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Txn translation (docs/etcd.md, "Txn"): an etcd Txn becomes one
// api.TxnRequest on one cell. Compares become conditions (a create
// revision = 0 is "missing"; the others the compare kinds, revisions
// passed whole: the fsm compares epoch and index as a token does);
// the success branch's puts and single-key deletes become its writes;
// reads in either branch run after the transaction decided (they see
// the state after it, at a revision >= its own). An else branch with
// writes, a nested Txn, a range delete in a Txn or a compare over a
// range answer Unimplemented.

// txnPlan is an etcd Txn translated, before its keys are read.
type txnPlan struct {
	prefix   PrefixInfo
	compares []txnCompare
	then     []txnWrite
	// reads are both branches' ops in order (writes hold their place in
	// then: thenOps[i] >= 0 is then[thenOps[i]], else a read).
	success, failure []*pb.RequestOp
	// readAll: an attempt's pin failed; every written key is read
	// (provenMissing no longer skips one).
	readAll bool
}

// txnCompare is one compare with its key's path.
type txnCompare struct {
	cmp *pb.Compare
	key keyPath
}

// txnWrite is one write of the success branch with its key's path.
type txnWrite struct {
	put *pb.PutRequest         // nil for a delete
	del *pb.DeleteRangeRequest // nil for a put
	key keyPath
}

// planTxn translates r's shape: bounds, one prefix, supported ops.
func (g *Gateway) planTxn(r *pb.TxnRequest) (txnPlan, error) {
	if len(r.Compare) > MaxTxnCompares {
		return txnPlan{}, status.Errorf(codes.InvalidArgument, "a transaction has %d compares, limit %d (MaxTxnCompares)", len(r.Compare), MaxTxnCompares)
	}
	if len(r.Success) > MaxTxnOps+MaxTxnReads || len(r.Failure) > MaxTxnOps+MaxTxnReads {
		return txnPlan{}, rpctypes.ErrGRPCTooManyOps
	}
	pl := txnPlan{success: r.Success, failure: r.Failure}
	var prefixes []PrefixInfo
	for _, c := range r.Compare {
		if len(c.RangeEnd) != 0 {
			return txnPlan{}, status.Error(codes.Unimplemented, "a compare over a range of keys is not supported by the lockd etcd gateway: compare single keys")
		}
		kp, err := g.keys.path(c.Key)
		if err != nil {
			return txnPlan{}, err
		}
		pl.compares = append(pl.compares, txnCompare{cmp: c, key: kp})
		prefixes = append(prefixes, kp.Prefix)
	}
	seen := map[string]bool{}
	for _, op := range r.Success {
		w, isWrite, err := g.planWrite(op)
		if err != nil {
			return txnPlan{}, err
		}
		if !isWrite {
			p, err := g.planRead(op)
			if err != nil {
				return txnPlan{}, err
			}
			prefixes = append(prefixes, p)
			continue
		}
		if seen[w.key.Path] {
			return txnPlan{}, rpctypes.ErrGRPCDuplicateKey
		}
		seen[w.key.Path] = true
		pl.then = append(pl.then, w)
		prefixes = append(prefixes, w.key.Prefix)
	}
	if len(pl.then) > MaxTxnOps {
		return txnPlan{}, rpctypes.ErrGRPCTooManyOps
	}
	for _, op := range r.Failure {
		if _, isWrite, err := g.planWrite(op); err != nil || isWrite {
			return txnPlan{}, status.Error(codes.Unimplemented,
				"writes in a transaction's else branch are not supported by the lockd etcd gateway: only reads; write in a second transaction whose compares are the negation")
		}
		p, err := g.planRead(op)
		if err != nil {
			return txnPlan{}, err
		}
		prefixes = append(prefixes, p)
	}
	p, err := onePrefix(prefixes)
	pl.prefix = p
	return pl, err
}

// planWrite checks a branch op: a put or single-key delete is a write;
// a range is a read; anything else is refused.
func (g *Gateway) planWrite(op *pb.RequestOp) (txnWrite, bool, error) {
	switch o := op.Request.(type) {
	case *pb.RequestOp_RequestRange:
		return txnWrite{}, false, nil
	case *pb.RequestOp_RequestPut:
		r := o.RequestPut
		switch {
		case r.IgnoreValue && len(r.Value) != 0:
			return txnWrite{}, true, rpctypes.ErrGRPCValueProvided
		case r.IgnoreLease && r.Lease != 0:
			return txnWrite{}, true, rpctypes.ErrGRPCLeaseProvided
		}
		kp, err := g.keys.path(r.Key)
		return txnWrite{put: r, key: kp}, true, err
	case *pb.RequestOp_RequestDeleteRange:
		r := o.RequestDeleteRange
		if len(r.RangeEnd) != 0 {
			return txnWrite{}, true, status.Error(codes.Unimplemented,
				"a range delete inside a transaction is not supported by the lockd etcd gateway: delete single keys, or the range with DeleteRange")
		}
		kp, err := g.keys.path(r.Key)
		return txnWrite{del: r, key: kp}, true, err
	case *pb.RequestOp_RequestTxn:
		return txnWrite{}, true, status.Error(codes.Unimplemented, "a transaction inside a transaction is not supported by the lockd etcd gateway")
	}
	return txnWrite{}, true, status.Error(codes.InvalidArgument, "etcdserver: a transaction op without a request")
}

// planRead is the prefix a branch's range reads, the range checked
// whole (its limit, its sort), so that a bad read refuses the
// transaction before it writes.
func (g *Gateway) planRead(op *pb.RequestOp) (PrefixInfo, error) {
	rd, err := g.planRangeRead(op.GetRequestRange())
	return rd.sp.Prefix, err
}

// onePrefix is the one prefix every key of a transaction lies in.
func onePrefix(ps []PrefixInfo) (PrefixInfo, error) {
	if len(ps) == 0 {
		return PrefixInfo{}, nil // an empty transaction: it succeeds, touching nothing
	}
	for _, p := range ps[1:] {
		if p.Prefix != ps[0].Prefix {
			return PrefixInfo{}, status.Errorf(codes.FailedPrecondition,
				"a transaction over two cells (prefixes %s and %s) is not served: each prefix is its own cell; keep a transaction's keys in one prefix", ps[0].Prefix, p.Prefix)
		}
	}
	return ps[0], nil
}

// noOwner is the owner a lease compare names for a lease without a
// session on the cell: no node has it (session ids are never this).
const noOwner = ^uint64(0)

// condOf translates one compare; owner is the session of a lease
// compare's lease on the cell (noOwner if it has none there).
func condOf(c *pb.Compare, path string, owner uint64) (api.TxnCond, error) {
	cmp, err := cmpOf(c.Result)
	if err != nil {
		return api.TxnCond{}, err
	}
	cond := api.TxnCond{Path: path, Cmp: cmp}
	switch c.Target {
	case pb.Compare_CREATE:
		// CREATE = 0 ("the key does not exist") is a compare too, not
		// the missing condition: a container (a parent the gateway made)
		// is not a key, and only the compares treat it as missing.
		cond.If, cond.Rev = api.CondCreateRev, revArg(c.GetCreateRevision())
	case pb.Compare_MOD:
		cond.If, cond.Rev = api.CondModRev, revArg(c.GetModRevision())
	case pb.Compare_VERSION:
		cond.If, cond.Version = api.CondVersionCmp, revArg(c.GetVersion())
	case pb.Compare_VALUE:
		cond.If, cond.Value = api.CondValue, c.GetValue()
	case pb.Compare_LEASE:
		if cmp != api.CmpEqual && cmp != api.CmpNotEqual {
			return api.TxnCond{}, status.Error(codes.Unimplemented, "a lease compare other than = or != is not supported by the lockd etcd gateway (lease ids are not ordered here)")
		}
		cond.If, cond.Owner = api.CondOwner, owner
	default:
		return api.TxnCond{}, status.Errorf(codes.InvalidArgument, "etcdserver: unknown compare target %d", c.Target)
	}
	return cond, nil
}

// revArg is a compared number as the condition carries it: negative
// numbers compare as 0 (no revision, version or lease is negative).
func revArg(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// cmpOf is a compare's operator.
func cmpOf(r pb.Compare_CompareResult) (api.TxnCmp, error) {
	switch r {
	case pb.Compare_EQUAL:
		return api.CmpEqual, nil
	case pb.Compare_NOT_EQUAL:
		return api.CmpNotEqual, nil
	case pb.Compare_LESS:
		return api.CmpLess, nil
	case pb.Compare_GREATER:
		return api.CmpGreater, nil
	}
	return "", status.Errorf(codes.InvalidArgument, "etcdserver: unknown compare result %d", r)
}
