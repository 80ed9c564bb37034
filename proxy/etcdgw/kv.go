package etcdgw

import (
	"bytes"
	"context"
	"sort"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// KV.Range (docs/etcd.md, "KV"): one key, or a range clamped to one
// prefix, read on the cell's leader (serializable reads are served
// linearizable). A sort other than by key ascending, or a revision
// filter, reads the whole range (at most MaxSortFetch keys) and sorts
// and filters it here. A read at a past revision is rebuilt from the
// current read and the cell's change ring (kv_past.go).

// Range answers a range.
func (s *kvServer) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	return s.g.rangeAs(ctx, w, r)
}

// rangeAs answers r for w.
func (g *Gateway) rangeAs(ctx context.Context, w who, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	rd, err := g.planRangeRead(r)
	if err != nil {
		return nil, err
	}
	resp, err := g.readSpan(ctx, w, rd.sp, rd.opts)
	if err != nil {
		return nil, grpcError(err)
	}
	return g.answerRange(ctx, w, rd, resp)
}

// rangeRead is a range to answer: the request, its span in path space,
// how it is read (plan) and what the lockd is asked (opts).
type rangeRead struct {
	r    *pb.RangeRequest
	sp   keySpan
	plan rangePlan
	opts rangeOpts
}

// planRangeRead checks r and plans its read.
func (g *Gateway) planRangeRead(r *pb.RangeRequest) (rangeRead, error) {
	if r.Limit < 0 {
		return rangeRead{}, status.Error(codes.InvalidArgument, "etcdserver: limit is negative")
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return rangeRead{}, rpctypes.ErrGRPCInvalidSortOption
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return rangeRead{}, rpctypes.ErrGRPCInvalidSortOption
	}
	sp, err := g.keys.span(r.Key, r.RangeEnd)
	if err != nil {
		return rangeRead{}, err
	}
	plan := planRange(r)
	// Sorting by value needs the values, even for keys_only.
	keysOnly := r.KeysOnly && !(plan.whole && r.SortTarget == pb.RangeRequest_VALUE)
	return rangeRead{r: r, sp: sp, plan: plan, opts: rangeOpts{limit: plan.fetch, keysOnly: keysOnly, countOnly: r.CountOnly && !plan.whole}}, nil
}

// answerRange answers rd from resp, the lockd's read of its span: at a
// past revision rebuilt from the change ring (kv_past.go), sorted,
// filtered and limited here when the plan says so.
func (g *Gateway) answerRange(ctx context.Context, w who, rd rangeRead, resp api.RangeResponse) (*pb.RangeResponse, error) {
	r, plan := rd.r, rd.plan
	var err error
	if resp, plan, err = g.readAt(ctx, w, rd.sp, r, plan, rd.opts.keysOnly, resp); err != nil {
		return nil, err
	}
	p := rd.sp.Prefix
	p.Epoch = resp.Epoch
	if plan.whole && resp.More {
		return nil, status.Errorf(codes.ResourceExhausted,
			"a range sorted other than by key ascending, or filtered by revision, reads the whole range here and it holds more than %d keys (MaxSortFetch): narrow it", MaxSortFetch)
	}
	if r.Limit == 0 && resp.More {
		return nil, status.Errorf(codes.ResourceExhausted,
			"the range holds more than one answer carries (%d keys, api.MaxRangeKeys, or %d bytes of values, api.MaxRangeBytes): page it with a limit, from the key after the last one", api.MaxRangeKeys, api.MaxRangeBytes)
	}
	out := &pb.RangeResponse{Header: g.header(p, resp.Index), Count: int64(resp.Count), More: resp.More}
	kvs := make([]*mvccpb.KeyValue, 0, len(resp.Nodes))
	nodes := make([]*api.Node, 0, len(resp.Nodes))
	for i := range resp.Nodes {
		if n := &resp.Nodes[i]; isKey(n) {
			kvs = append(kvs, g.keyValue(p, rd.sp.Rel, n, rd.opts.keysOnly))
			nodes = append(nodes, n)
		}
	}
	g.fillForeignLeases(ctx, w, p, nodes, kvs) // keys of other gateways' leases (forward_leases.go)
	if plan.whole {
		kvs = filterKVs(kvs, r)
		sortKVs(kvs, plan.order, r.SortTarget)
		if r.Limit > 0 && int64(len(kvs)) > r.Limit {
			kvs, out.More = kvs[:r.Limit], true
		}
		for _, kv := range kvs {
			if r.KeysOnly {
				kv.Value = nil
			}
		}
	}
	if r.CountOnly {
		kvs = nil
	}
	out.Kvs = kvs
	return out, nil
}

// rangePlan is how a range is read: fetch nodes (0: the lockd's
// default, its bound), whole (read it all, then filter, sort and limit
// here), in order.
type rangePlan struct {
	fetch int
	whole bool
	order pb.RangeRequest_SortOrder
}

// planRange decides how r is read (etcd's sort defaults: a target other
// than the key with no order is ascending; by key ascending is the
// order ranges come in).
func planRange(r *pb.RangeRequest) rangePlan {
	order := r.SortOrder
	switch {
	case r.SortTarget != pb.RangeRequest_KEY && order == pb.RangeRequest_NONE:
		order = pb.RangeRequest_ASCEND
	case r.SortTarget == pb.RangeRequest_KEY && order == pb.RangeRequest_ASCEND:
		order = pb.RangeRequest_NONE
	}
	filtered := r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0
	if order != pb.RangeRequest_NONE || filtered {
		return rangePlan{fetch: MaxSortFetch, whole: true, order: order}
	}
	limit := int(min(r.Limit, int64(api.MaxRangeKeys)))
	return rangePlan{fetch: limit, order: order}
}

// checkRevision serves a read at revision want only if it is the
// current one (rev(epoch, index)): history is not kept. A later one is
// etcd's future revision; an earlier one its compacted.
func checkRevision(want int64, epoch, index uint64) error {
	if want <= 0 {
		return nil
	}
	cur := rev(epoch, index)
	switch {
	case want > cur:
		return rpctypes.ErrGRPCFutureRev
	case want < cur:
		return rpctypes.ErrGRPCCompacted
	}
	return nil
}

// filterKVs keeps the keys within r's revision bounds.
func filterKVs(kvs []*mvccpb.KeyValue, r *pb.RangeRequest) []*mvccpb.KeyValue {
	out := kvs[:0]
	for _, kv := range kvs {
		switch {
		case r.MinModRevision != 0 && kv.ModRevision < r.MinModRevision,
			r.MaxModRevision != 0 && kv.ModRevision > r.MaxModRevision,
			r.MinCreateRevision != 0 && kv.CreateRevision < r.MinCreateRevision,
			r.MaxCreateRevision != 0 && kv.CreateRevision > r.MaxCreateRevision:
			continue
		}
		out = append(out, kv)
	}
	return out
}

// sortKVs sorts kvs by target in order (NONE: left in key order).
func sortKVs(kvs []*mvccpb.KeyValue, order pb.RangeRequest_SortOrder, target pb.RangeRequest_SortTarget) {
	if order == pb.RangeRequest_NONE {
		return
	}
	less := func(a, b *mvccpb.KeyValue) int {
		switch target {
		case pb.RangeRequest_VERSION:
			return cmpInt(a.Version, b.Version)
		case pb.RangeRequest_CREATE:
			return cmpInt(a.CreateRevision, b.CreateRevision)
		case pb.RangeRequest_MOD:
			return cmpInt(a.ModRevision, b.ModRevision)
		case pb.RangeRequest_VALUE:
			return bytes.Compare(a.Value, b.Value)
		}
		return bytes.Compare(a.Key, b.Key)
	}
	sort.SliceStable(kvs, func(i, j int) bool {
		c := less(kvs[i], kvs[j])
		if order == pb.RangeRequest_DESCEND {
			return c > 0
		}
		return c < 0
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
