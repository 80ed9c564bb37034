package etcdgw

import (
	"context"

	"github.com/lockservice/lockd/api"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Reads the KV handlers share: a range of a span, one node, and a node
// as an etcd KeyValue.

// rangeOpts are what a range read asks beyond its span.
type rangeOpts struct {
	limit      int
	keysOnly   bool
	countOnly  bool
	containers bool // include containers (a write's own read: it must see them)
}

// readSpan reads sp's nodes with w's token (linearizable: the lockd
// reads on the cell's leader after a ReadIndex).
func (g *Gateway) readSpan(ctx context.Context, w who, sp keySpan, o rangeOpts) (api.RangeResponse, error) {
	var resp api.RangeResponse
	err := g.be.Call(ctx, w.token, api.RouteRange, spanRequest(sp, o), &resp)
	return resp, err
}

// spanRequest is the lockd's range request of sp.
func spanRequest(sp keySpan, o rangeOpts) api.RangeRequest {
	return api.RangeRequest{Root: sp.Root, Start: sp.Start, End: sp.End, Limit: o.limit,
		KeysOnly: o.keysOnly, CountOnly: o.countOnly, SkipContainers: !o.containers}
}

// keySpanOf is the span of the one node at p (a write's or a compare's
// key).
func keySpanOf(p keyPath) keySpan {
	return keySpan{Start: p.Path, Rel: p.Rel, Prefix: p.Prefix, Root: p.Path}
}

// keyReadOpts are a single key's read: containers included (a write
// must see them).
var keyReadOpts = rangeOpts{limit: 1, containers: true}

// readSpans reads every request of prefix's cell in one read with w's
// token (api.RouteRanges): every answer at one index. At most
// api.MaxRangesPerRead requests; none reads nothing.
func (g *Gateway) readSpans(ctx context.Context, w who, prefix string, reqs []api.RangeRequest) (api.RangesResponse, error) {
	if len(reqs) == 0 {
		return api.RangesResponse{}, nil
	}
	var resp api.RangesResponse
	if err := g.be.Call(ctx, w.token, api.RouteRanges, api.RangesRequest{Root: prefix, Reads: reqs}, &resp); err != nil {
		return resp, err
	}
	if len(resp.Reads) != len(reqs) {
		return resp, api.Errorf(api.CodeInternal, "a ranges read of %d answered %d", len(reqs), len(resp.Reads))
	}
	return resp, nil
}

// nodeAt is the node at path in resp (a single key's read): whether it
// exists.
func nodeAt(resp api.RangeResponse, path string) (api.Node, bool) {
	for _, n := range resp.Nodes {
		if n.Path == path {
			return n, true
		}
	}
	return api.Node{}, false
}

// readKey reads the node at p (containers included): the node, whether
// it exists, and the index and epoch of the read.
func (g *Gateway) readKey(ctx context.Context, w who, p keyPath) (api.Node, bool, api.RangeResponse, error) {
	resp, err := g.readSpan(ctx, w, keySpanOf(p), keyReadOpts)
	if err != nil {
		return api.Node{}, false, resp, err
	}
	n, ok := nodeAt(resp, p.Path)
	return n, ok, resp, nil
}

// keyValue is n as an etcd KeyValue: revisions of p's epoch, the lease
// whose session owns an ephemeral node (0 if none this gateway knows).
func (g *Gateway) keyValue(p PrefixInfo, rel bool, n *api.Node, keysOnly bool) *mvccpb.KeyValue {
	kv := &mvccpb.KeyValue{
		Key:            g.keys.key(n.Path, rel),
		CreateRevision: rev(p.Epoch, n.CreateIndex),
		ModRevision:    rev(p.Epoch, n.ModifyIndex),
		Version:        int64(n.Version),
	}
	if !keysOnly {
		kv.Value = n.Value
	}
	if n.Ephemeral && n.Owner != 0 {
		kv.Lease = g.leases.leaseOf(p.Cell, n.Owner)
	}
	return kv
}

// isKey reports whether n is an etcd key (a container is a parent a put
// made, not a key).
func isKey(n *api.Node) bool { return !n.Container }
