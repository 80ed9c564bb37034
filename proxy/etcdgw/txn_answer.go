package etcdgw

import (
	"bytes"
	"context"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// txnAnswer answers a decided transaction: one response per op of the
// branch taken, reads run now (after the transaction). The header's
// revision is the transaction's own index when it wrote: clients take it
// as the revision of their writes (concurrency.Mutex makes it its key's
// create revision, and waits for the keys created before it), so a later
// read's revision there would make a locker wait for its own key. A
// transaction that wrote nothing answers at its newest read.
func (g *Gateway) txnAnswer(ctx context.Context, w who, pl *txnPlan, reads []keyRead, ok bool, index uint64) (*pb.TxnResponse, error) {
	ops := pl.failure
	if ok {
		ops = pl.success
	}
	out := &pb.TxnResponse{Succeeded: ok, Responses: make([]*pb.ResponseOp, 0, len(ops))}
	hdr := g.header(pl.prefix, index)
	j := 0 // the next write of pl.then
	for _, op := range ops {
		if rr := op.GetRequestRange(); rr != nil {
			resp, err := g.rangeAs(ctx, w, rr)
			if err != nil {
				return nil, err
			}
			if len(pl.then) == 0 || !ok {
				if resp.Header.Revision > hdr.Revision {
					hdr = resp.Header
				}
			}
			out.Responses = append(out.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: resp}})
			continue
		}
		out.Responses = append(out.Responses, g.writeResponse(pl.then[j], reads[j], pl.prefix))
		j++
	}
	out.Header = hdr
	for _, r := range out.Responses {
		setHeader(r, hdr)
	}
	return out, nil
}

// writeResponse is a committed write's response (its header set later).
func (g *Gateway) writeResponse(wr txnWrite, rd keyRead, p PrefixInfo) *pb.ResponseOp {
	var prev *mvccpb.KeyValue
	if rd.isKey() {
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

// setHeader gives a write's response the transaction's header (reads
// keep their own).
func setHeader(r *pb.ResponseOp, hdr *pb.ResponseHeader) {
	switch x := r.Response.(type) {
	case *pb.ResponseOp_ResponsePut:
		x.ResponsePut.Header = hdr
	case *pb.ResponseOp_ResponseDeleteRange:
		x.ResponseDeleteRange.Header = hdr
	}
}

// evalCompares decides a transaction with nothing to write: each
// compared key read in turn (linearizable each, not one snapshot).
func (g *Gateway) evalCompares(ctx context.Context, w who, pl *txnPlan) (txnOutcome, uint64, error) {
	var index uint64
	ok := true
	for _, c := range pl.compares {
		n, exists, rr, err := g.readKey(ctx, w, c.key)
		if err != nil {
			return 0, 0, err
		}
		index = max(index, rr.Index)
		pl.prefix.Epoch = rr.Epoch
		if !exists || n.Container {
			n = api.Node{}
		}
		if !evalCompare(c.cmp, &n, rr.Epoch, g.compareOwner(w, c.cmp, pl.prefix.Cell)) {
			ok = false
		}
	}
	if ok {
		return txnCommitted, index, nil
	}
	return txnComparesFailed, index, nil
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
