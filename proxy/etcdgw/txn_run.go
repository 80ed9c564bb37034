package etcdgw

import (
	"context"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Txn execution (docs/etcd.md, "Txn"). The success branch's keys are
// read first; each write is pinned to what was read (a condition the
// gateway adds after the client's compares), so a put with a lease
// creates or rewrites exactly the node it saw, and a delete of a
// missing key is no write (Deleted 0). A failure on a pinned condition
// means a key changed in between: read again, at most MaxWriteRetries
// times. A failure on a client's compare runs the else branch's reads.

// Txn commits a transaction. One that changes a key another gateway's
// lease holds is refused here for want of its session, then asked of
// the other gateways (orAtPeers, forward.go).
func (s *kvServer) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	return orAtPeers(ctx, s.g, "/etcdserverpb.KV/Txn", r, func() *pb.TxnResponse { return &pb.TxnResponse{} },
		func() (*pb.TxnResponse, error) { return s.txn(ctx, r) })
}

// txn is Txn here.
func (s *kvServer) txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	pl, err := s.g.planTxn(r)
	if err != nil {
		return nil, err
	}
	for range MaxWriteRetries {
		out, retry, err := s.g.txnAttempt(ctx, w, &pl)
		if !retry {
			return out, grpcError(err)
		}
	}
	return nil, status.Errorf(codes.Aborted, "a transaction's keys changed under %d attempts (MaxWriteRetries): retry", MaxWriteRetries)
}

// txnOutcome is how a transaction attempt ended.
type txnOutcome int

const (
	txnCommitted      txnOutcome = iota // the compares held: the success branch
	txnComparesFailed                   // a client's compare failed: the else branch
	txnPinFailed                        // a key the gateway read changed: read again
)

// txnAttempt reads the written keys (not those a create-revision-0
// compare already proves missing: readWrites), commits (or, with
// nothing to write, decides it on one read: txnReadOnly) with both
// branches' reads, answered with it by a lockd that can (else read
// after it); retry says a pinned key changed in between.
func (g *Gateway) txnAttempt(ctx context.Context, w who, pl *txnPlan) (*pb.TxnResponse, bool, error) {
	reads, readIndex, err := g.readWrites(ctx, w, pl)
	if err != nil {
		return nil, false, err
	}
	req, err := g.buildTxn(ctx, w, pl, reads)
	if err != nil {
		return nil, false, err
	}
	if len(req.Then) == 0 {
		return g.txnReadOnly(ctx, w, pl, reads)
	}
	br, err := g.planBranches(pl)
	if err != nil {
		return nil, false, err
	}
	req.Reads = br.ask(&req)
	cm, err := g.commitTxn(ctx, w, req, len(pl.compares))
	switch {
	case err != nil:
		return nil, false, elsewhere(err, g.unknownOwner(pl, reads)) // forward.go
	case cm.outcome == txnPinFailed:
		// A key changed since read, or one left unread is there after
		// all (a container: missing to a create-revision compare, not
		// to the pin): read every key from now on.
		pl.readAll = true
		return nil, true, nil
	}
	if cm.epoch != 0 && cm.epoch != pl.prefix.Epoch {
		// The keys were read on another cell (the prefix moved since):
		// that cell's index says nothing of this one's.
		readIndex = 0
	}
	g.txnEpoch(ctx, w, pl, cm.epoch, readIndex)
	out, err := g.txnAnswer(ctx, w, pl, br, reads, cm, max(cm.index, readIndex))
	return out, false, err
}

// txnCommit is how a transaction attempt ended (txnOutcome), the index
// it applied at, the prefix's epoch as it was decided (0 from a lockd
// before it), and its branch's reads if the lockd answered them.
type txnCommit struct {
	outcome txnOutcome
	index   uint64
	epoch   uint64
	reads   *api.RangesResponse
}

// commitTxn sends req and says how it ended.
func (g *Gateway) commitTxn(ctx context.Context, w who, req api.TxnRequest, clientConds int) (txnCommit, error) {
	var resp api.TxnResponse
	if err := g.be.Call(ctx, w.token, api.RouteTxn, req, &resp); err != nil {
		return txnCommit{}, notEmptyStatus(err)
	}
	cm := txnCommit{index: resp.Index, epoch: resp.Epoch, reads: resp.Reads}
	if resp.Succeeded {
		cm.outcome = txnCommitted
		return cm, nil
	}
	f := resp.Failed
	switch {
	case f == nil:
		return txnCommit{}, api.Errorf(api.CodeInternal, "a transaction failed without saying why")
	case f.Kind == api.TxnFailedIf && f.Index < clientConds:
		cm.outcome = txnComparesFailed
		return cm, nil
	case f.Kind == api.TxnFailedIf:
		return txnCommit{outcome: txnPinFailed}, nil
	}
	return txnCommit{}, notEmptyStatus(txnFailure(f))
}

// txnEpoch sets the prefix's epoch of a decided transaction (its
// revision's high bits) as the lockd decided it. From a lockd before
// that it stays as the keys' read saw it; with none read, a read of the
// first written key says it (the directory's may be a move behind, and
// a revision of another epoch than the cell's reads would take a
// concurrency.Mutex past its predecessor); if that read fails, the
// transaction has applied all the same: the directory's.
func (g *Gateway) txnEpoch(ctx context.Context, w who, pl *txnPlan, epoch, readIndex uint64) {
	switch {
	case epoch != 0:
		pl.prefix.Epoch = epoch
	case readIndex == 0:
		if _, _, rr, err := g.readKey(ctx, w, pl.then[0].key); err == nil {
			pl.prefix.Epoch = rr.Epoch
		}
	}
}

// unknownOwner reports whether a written key is an ephemeral node whose
// session no lease here has (perhaps another gateway's lease's).
func (g *Gateway) unknownOwner(pl *txnPlan, reads []keyRead) bool {
	for _, rd := range reads {
		if rd.exists && rd.node.Ephemeral && rd.node.Owner != 0 && g.leases.leaseOf(pl.prefix.Cell, rd.node.Owner) == 0 {
			return true
		}
	}
	return false
}

// keyRead is what a write's key held when read, and the epoch of the
// cell that answered (its revisions').
type keyRead struct {
	node   api.Node
	exists bool // a node is there (perhaps a container)
	epoch  uint64
}

// isKey reports whether the read found a key (not a container).
func (k keyRead) isKey() bool { return k.exists && !k.node.Container }

// readWrites reads each written key but those a compare proves missing
// (provenMissing); index is the newest read's (0: none read), and the
// prefix's epoch is the reads' (pl.prefix.Epoch).
func (g *Gateway) readWrites(ctx context.Context, w who, pl *txnPlan) ([]keyRead, uint64, error) {
	out := make([]keyRead, len(pl.then))
	var index uint64
	for i, wr := range pl.then {
		if provenMissing(pl, wr) {
			continue // keyRead{}: missing, as it must be if the transaction writes
		}
		n, ok, rr, err := g.readKey(ctx, w, wr.key)
		if err != nil {
			return nil, 0, err
		}
		out[i] = keyRead{node: n, exists: ok, epoch: rr.Epoch}
		index = max(index, rr.Index)
		pl.prefix.Epoch = rr.Epoch
	}
	return out, index, nil
}

// provenMissing reports whether a put's key need not be read: a compare
// of the transaction says its create revision is 0 (concurrency.Mutex's,
// Election's), so when the put applies the key is missing, and the
// write it becomes is what a read finding it missing makes (a create
// with its lease, a put without one; pinned missing, as the compare
// already is). When the key is there the compare fails and nothing is
// written. A put that keeps the key's value or lease needs the key read.
func provenMissing(pl *txnPlan, wr txnWrite) bool {
	if mutant.On(mutant.EtcdTxnUnread) {
		return wr.put != nil // broken: no put's key read
	}
	if pl.readAll || wr.put == nil || wr.put.IgnoreValue || wr.put.IgnoreLease {
		return false
	}
	for _, c := range pl.compares {
		if c.key.Path == wr.key.Path && c.cmp.Target == pb.Compare_CREATE &&
			c.cmp.Result == pb.Compare_EQUAL && c.cmp.GetCreateRevision() == 0 {
			return true
		}
	}
	return false
}
