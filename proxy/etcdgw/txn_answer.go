package etcdgw

import (
	"bytes"
	"cmp"
	"context"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// txnAnswer answers a transaction that wrote (or whose compares failed
// on the cell): one response per op of the branch taken, the branch's
// reads as the lockd answered them with the transaction (cm.reads), or
// else run after it in one read of the cell (api.RouteRanges: every
// read at one index). The header's revision is the transaction's own
// index when it wrote: clients take it as the revision of their writes
// (concurrency.Mutex makes it its key's create revision, and waits for
// the keys created before it), so a later read's revision there would
// make a locker wait for its own key. A transaction that wrote nothing
// answers at its reads' revision.
func (g *Gateway) txnAnswer(ctx context.Context, w who, pl *txnPlan, br txnBranches, reads []keyRead, cm txnCommit, index uint64) (*pb.TxnResponse, error) {
	ok := cm.outcome == txnCommitted
	ops, rds := pl.failure, br.failure
	if ok {
		ops, rds = pl.success, br.success
	}
	got, err := g.branchAnswers(ctx, w, pl, rds, cm)
	if err != nil {
		return nil, grpcError(err)
	}
	return g.txnResponse(ctx, w, pl, txnBranch{ops: ops, rds: rds, got: got.Reads}, reads, ok, index, false)
}

// branchAnswers are the lockd's answers to rds: those it gave with the
// transaction if they are whole and of its prefix's epoch, else read now.
func (g *Gateway) branchAnswers(ctx context.Context, w who, pl *txnPlan, rds []rangeRead, cm txnCommit) (api.RangesResponse, error) {
	if r := cm.reads; r != nil && len(r.Reads) == len(rds) && r.Epoch == pl.prefix.Epoch && r.Index >= cm.index {
		return *r, nil
	}
	return g.readBranch(ctx, w, pl.prefix.Prefix, spanRequests(rds))
}

// txnBranches are the planned reads of a transaction's two branches.
type txnBranches struct {
	success, failure []rangeRead
}

// planBranches plans both branches' reads, before the transaction: a
// read the gateway cannot make refuses it with nothing written.
func (g *Gateway) planBranches(pl *txnPlan) (txnBranches, error) {
	success, err := g.planReads(pl.success)
	if err != nil {
		return txnBranches{}, err
	}
	failure, err := g.planReads(pl.failure)
	if err != nil {
		return txnBranches{}, err
	}
	return txnBranches{success: success, failure: failure}, nil
}

// ask is the branch reads for the lockd to answer with req: nil when
// there are none, or when they would take req past the request body's
// bound (they are read after it then).
func (br txnBranches) ask(req *api.TxnRequest) *api.TxnReads {
	if len(br.success) == 0 && len(br.failure) == 0 {
		return nil
	}
	r := &api.TxnReads{Then: spanRequests(br.success), Else: spanRequests(br.failure)}
	if txnBody(req)+rangesBody("", r.Then)+rangesBody("", r.Else) > api.MaxRequestBody {
		return nil
	}
	return r
}

// txnBody is about the encoded size of req (JSON: paths escaped as
// jsonLen counts, values in base64, a third larger), an over-estimate.
func txnBody(req *api.TxnRequest) int {
	n := 256 + jsonLen(req.Secret) // the header's numbers and names
	for _, o := range req.Then {
		n += jsonLen(o.Path) + 2*len(o.Value) + txnFieldsBody
	}
	for _, c := range req.If {
		n += jsonLen(c.Path) + 2*len(c.Value) + txnFieldsBody
	}
	return n
}

// txnFieldsBody is at least the JSON of a write's or condition's fields
// other than its path and value: names, numbers of 20 digits, flags.
const txnFieldsBody = 256

// readBranch reads a decided branch's reqs in one read; a branch more
// than one read carries (api.RouteRanges' bounds, or the request
// body's) is read one range at a time: the transaction has applied, so
// its answer must not become a refusal for the size of its reads.
func (g *Gateway) readBranch(ctx context.Context, w who, prefix string, reqs []api.RangeRequest) (api.RangesResponse, error) {
	if rangesBody(prefix, reqs) <= api.MaxRequestBody {
		resp, err := g.readSpans(ctx, w, prefix, reqs)
		if !tooBigForOneRead(err) {
			return resp, err
		}
	}
	return g.readEach(ctx, w, reqs)
}

// txnBranch is the branch a transaction took: its ops, the plans of its
// reads and the lockd's answers to them (one each, in order).
type txnBranch struct {
	ops []*pb.RequestOp
	rds []rangeRead
	got []api.RangeResponse
}

// txnResponse is the answer of branch b: reads answered from b.got,
// writes from pl.then and what was read of their keys. oneRead: the
// transaction was decided and read at index, every response's header
// says so (a read at a past revision, rebuilt from a later read, too).
func (g *Gateway) txnResponse(ctx context.Context, w who, pl *txnPlan, b txnBranch, reads []keyRead, ok bool, index uint64, oneRead bool) (*pb.TxnResponse, error) {
	out := &pb.TxnResponse{Succeeded: ok, Responses: make([]*pb.ResponseOp, 0, len(b.ops))}
	hdr := g.header(pl.prefix, index)
	j, k := 0, 0 // the next write of pl.then, the next read of b
	for _, op := range b.ops {
		if op.GetRequestRange() != nil {
			resp, err := g.answerRange(ctx, w, b.rds[k], b.got[k])
			if err != nil {
				return nil, err
			}
			k++
			if !oneRead && (len(pl.then) == 0 || !ok) && resp.Header.Revision > hdr.Revision {
				hdr = resp.Header
			}
			out.Responses = append(out.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: resp}})
			continue
		}
		out.Responses = append(out.Responses, g.writeResponse(pl.then[j], reads[j], pl.prefix))
		j++
	}
	out.Header = hdr
	for _, r := range out.Responses {
		setHeader(r, hdr, oneRead)
	}
	return out, nil
}

// planReads plans the range reads of a branch's ops, in order.
func (g *Gateway) planReads(ops []*pb.RequestOp) ([]rangeRead, error) {
	var rds []rangeRead
	for _, op := range ops {
		if r := op.GetRequestRange(); r != nil {
			rd, err := g.planRangeRead(r)
			if err != nil {
				return nil, err
			}
			rds = append(rds, rd)
		}
	}
	return rds, nil
}

// spanRequests are the lockd's range requests of rds.
func spanRequests(rds []rangeRead) []api.RangeRequest {
	out := make([]api.RangeRequest, len(rds))
	for i, rd := range rds {
		out[i] = spanRequest(rd.sp, rd.opts)
	}
	return out
}

// writeResponse is a committed write's response (its header set later).
func (g *Gateway) writeResponse(wr txnWrite, rd keyRead, p PrefixInfo) *pb.ResponseOp {
	var prev *mvccpb.KeyValue
	if rd.isKey() {
		p.Epoch = cmp.Or(rd.epoch, p.Epoch) // its revisions are the read's cell's
		prev = g.keyValue(p, wr.key.Rel, &rd.node, false)
	}
	if wr.put != nil {
		resp := &pb.PutResponse{}
		if wr.put.PrevKv {
			resp.PrevKv = prev
		}
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: resp}}
	}
	resp := &pb.DeleteRangeResponse{}
	if prev != nil {
		resp.Deleted = 1
		if wr.del.PrevKv {
			resp.PrevKvs = []*mvccpb.KeyValue{prev}
		}
	}
	return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: resp}}
}

// setHeader gives a write's response the transaction's header, and a
// read's too if reads (else reads keep their own).
func setHeader(r *pb.ResponseOp, hdr *pb.ResponseHeader, reads bool) {
	switch x := r.Response.(type) {
	case *pb.ResponseOp_ResponsePut:
		x.ResponsePut.Header = hdr
	case *pb.ResponseOp_ResponseDeleteRange:
		x.ResponseDeleteRange.Header = hdr
	case *pb.ResponseOp_ResponseRange:
		if reads {
			x.ResponseRange.Header = hdr
		}
	}
}

// evalCompare evaluates c on n (the zero Node for a missing key), as the
// cell evaluates its compare conditions.
func evalCompare(c *pb.Compare, n *api.Node, epoch, owner uint64) bool {
	missing := n.Path == ""
	var d int
	switch c.Target {
	case pb.Compare_VERSION:
		d = cmpInt(int64(n.Version), c.GetVersion())
	case pb.Compare_CREATE:
		d = cmpInt(rev(epoch, n.CreateIndex), c.GetCreateRevision())
	case pb.Compare_MOD:
		d = cmpInt(rev(epoch, n.ModifyIndex), c.GetModRevision())
	case pb.Compare_VALUE:
		if missing {
			return false
		}
		d = bytes.Compare(n.Value, c.GetValue())
	case pb.Compare_LEASE:
		d = 1
		if n.Owner == owner {
			d = 0
		}
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return d == 0
	case pb.Compare_NOT_EQUAL:
		return d != 0
	case pb.Compare_LESS:
		return d < 0
	case pb.Compare_GREATER:
		return d > 0
	}
	return false
}
