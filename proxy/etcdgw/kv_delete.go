package etcdgw

import (
	"context"
	"sort"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// KV.DeleteRange (docs/etcd.md, "KV"). The keys are read first, then
// deleted pinned to the versions read (a key changed in between reads
// again, at most MaxWriteRetries times), so prev_kv is exactly what was
// deleted. A leased key is deleted with its lease's session (a lease of
// this credential: another's key is refused as the lockd refuses it).
// A range delete is one /v1/txn: at most MaxDeleteRangeKeys keys, all
// persistent or of one lease. A key with keys below it (keys are paths
// here) is refused FailedPrecondition: delete those first.

// DeleteRange deletes one key or a range.
func (s *kvServer) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	return orAtPeers(ctx, s.g, "/etcdserverpb.KV/DeleteRange", r, func() *pb.DeleteRangeResponse { return &pb.DeleteRangeResponse{} },
		func() (*pb.DeleteRangeResponse, error) { return s.g.deleteAs(ctx, w, r) }) // a key of another gateway's lease: forward.go
}

// deleteAs answers r for w.
func (g *Gateway) deleteAs(ctx context.Context, w who, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	sp, err := g.keys.span(r.Key, r.RangeEnd)
	if err != nil {
		return nil, err
	}
	for range MaxWriteRetries {
		out, retry, err := g.deletePinned(ctx, w, sp, r.PrevKv)
		if !retry {
			return out, grpcError(err)
		}
	}
	return nil, status.Errorf(codes.Aborted, "the keys changed under %d attempts of a delete (MaxWriteRetries): retry", MaxWriteRetries)
}

// deletePinned reads the span's keys and deletes them pinned to their
// versions; retry says one changed in between.
func (g *Gateway) deletePinned(ctx context.Context, w who, sp keySpan, prevKV bool) (*pb.DeleteRangeResponse, bool, error) {
	rr, err := g.readSpan(ctx, w, sp, rangeOpts{limit: MaxDeleteRangeKeys})
	if err != nil {
		return nil, false, err
	}
	if rr.More {
		return nil, false, status.Errorf(codes.ResourceExhausted,
			"a range delete removes at most %d keys (MaxDeleteRangeKeys: one transaction); the range holds more: delete it in parts", MaxDeleteRangeKeys)
	}
	p := sp.Prefix
	p.Epoch = rr.Epoch
	nodes := keysOf(rr.Nodes)
	if len(nodes) == 0 {
		return &pb.DeleteRangeResponse{Header: g.header(p, rr.Index)}, false, nil
	}
	hdr, unknownOwner, err := g.deleteSession(ctx, w, p, nodes)
	if err != nil {
		return nil, false, err
	}
	index, err := g.deleteNodes(ctx, w, hdr, nodes)
	if changedUnder(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, elsewhere(notEmptyStatus(err), unknownOwner) // forward.go
	}
	out := &pb.DeleteRangeResponse{Header: g.header(p, index), Deleted: int64(len(nodes))}
	if prevKV {
		out.PrevKvs = make([]*mvccpb.KeyValue, 0, len(nodes))
		for i := range nodes {
			out.PrevKvs = append(out.PrevKvs, g.keyValue(p, sp.Rel, &nodes[i], false))
		}
	}
	return out, false, nil
}

// keysOf are the keys among nodes (not containers), in key order.
func keysOf(nodes []api.Node) []api.Node {
	out := make([]api.Node, 0, len(nodes))
	for i := range nodes {
		if isKey(&nodes[i]) {
			out = append(out, nodes[i])
		}
	}
	return out
}

// deleteSession is the write header deleting nodes needs: none if all
// are persistent, else the one lease's session that owns the leased ones;
// unknownOwner if a session owns them that no lease here has.
func (g *Gateway) deleteSession(ctx context.Context, w who, p PrefixInfo, nodes []api.Node) (hdr api.WriteHeader, unknownOwner bool, err error) {
	var owner uint64
	for i := range nodes {
		n := &nodes[i]
		if !n.Ephemeral {
			continue
		}
		if owner != 0 && n.Owner != owner {
			return api.WriteHeader{}, false, status.Error(codes.FailedPrecondition,
				"the range holds keys of two leases: one range delete is one transaction with one lease; delete them separately")
		}
		owner = n.Owner
	}
	if owner == 0 {
		return api.WriteHeader{}, false, nil
	}
	lease := g.leases.leaseOf(p.Cell, owner)
	if lease == 0 {
		return api.WriteHeader{}, true, nil // the lockd decides (an admin may delete another session's key)
	}
	hdr, err = g.leases.session(ctx, w, lease, p)
	if err != nil {
		return api.WriteHeader{}, false, nil // not this credential's lease: the lockd decides
	}
	return hdr, false, nil
}

// deleteNodes deletes nodes pinned to their versions: one delete for
// one node, else one transaction (deepest paths first).
func (g *Gateway) deleteNodes(ctx context.Context, w who, hdr api.WriteHeader, nodes []api.Node) (uint64, error) {
	if len(nodes) == 1 {
		v := nodes[0].Version
		var resp api.WriteResponse
		err := g.be.Call(ctx, w.token, api.RouteDelete, api.DeleteRequest{WriteHeader: hdr, Path: nodes[0].Path, Version: &v}, &resp)
		return resp.Index, err
	}
	paths := make([]api.Node, len(nodes))
	copy(paths, nodes)
	sort.Slice(paths, func(i, j int) bool { return paths[i].Path > paths[j].Path })
	req := api.TxnRequest{WriteHeader: hdr}
	for i := range paths {
		req.If = append(req.If, api.TxnCond{If: api.CondVersion, Path: paths[i].Path, Version: paths[i].Version})
		req.Then = append(req.Then, api.TxnOp{Op: api.TxnDelete, Path: paths[i].Path})
	}
	var resp api.TxnResponse
	if err := g.be.Call(ctx, w.token, api.RouteTxn, req, &resp); err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, txnFailure(resp.Failed)
	}
	return resp.Index, nil
}

// txnFailure is a refused transaction's failure as an error.
func txnFailure(f *api.TxnFailure) error {
	if f == nil {
		return api.Errorf(api.CodeInternal, "a transaction failed without saying why")
	}
	return &api.Error{Code: f.Code, Message: f.Message}
}

// notEmptyStatus explains a delete refused because the key has keys
// below it.
func notEmptyStatus(err error) error {
	if api.CodeOf(err) == api.CodeNotEmpty {
		return status.Errorf(codes.FailedPrecondition,
			"keys are paths here and this key has keys below it: delete those first, or delete the whole prefix (%v)", err)
	}
	return err
}
