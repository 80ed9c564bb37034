package etcdgw

import (
	"context"
	"sync"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The lease of a key another gateway's lease holds (docs/etcd.md,
// "Several gateways"). A key's lease is the lease whose session owns its
// node, and only the granting gateway knows which lease a session is. A
// read that returns such keys (their KeyValue.Lease 0 here) asks the other
// gateways for one key of each unknown session (a Range of that key, with
// the caller's token; they answer with the lease they know), matches the
// answer by the key's create revision (the same node, so the same
// session) and remembers the session's lease: a session belongs to one
// lease for its whole life.

// Bounds of foreign lease lookups.
const (
	// maxForeignLookups bounds the sessions one read asks about; the
	// keys of others keep Lease 0.
	maxForeignLookups = 16
	// maxForeignLeases bounds the sessions remembered (all forgotten
	// when full: they are asked again).
	maxForeignLeases = 100_000
)

// foreignLeases remembers the leases of sessions other gateways granted.
type foreignLeases struct {
	mu sync.Mutex
	by map[sessionRef]int64
}

func (f *foreignLeases) get(ref sessionRef) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.by[ref]
}

func (f *foreignLeases) put(ref sessionRef, lease int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil || len(f.by) >= maxForeignLeases {
		f.by = map[sessionRef]int64{}
	}
	f.by[ref] = lease
}

// fillForeignLeases sets the Lease of every kv (of node nodes[i], on p's
// cell) whose owning session no lease here has, from what the other
// gateways know. A forwarded read asks no further.
func (g *Gateway) fillForeignLeases(ctx context.Context, w who, p PrefixInfo, nodes []*api.Node, kvs []*mvccpb.KeyValue) {
	if forwarded(ctx) || mutant.On(mutant.EtcdNoForward) {
		return
	}
	ask := map[uint64]*mvccpb.KeyValue{} // session -> one of its keys
	for i, kv := range kvs {
		n := nodes[i]
		if kv.Lease != 0 || !n.Ephemeral || n.Owner == 0 {
			continue
		}
		if l := g.foreign.get(sessionRef{p.Cell, n.Owner}); l != 0 {
			kv.Lease = l
			continue
		}
		if _, ok := ask[n.Owner]; !ok && len(ask) < maxForeignLookups {
			ask[n.Owner] = kv
		}
	}
	if len(ask) == 0 {
		return
	}
	done, err := g.takeForward(w)
	if err != nil {
		return
	}
	defer done()
	for owner, kv := range ask {
		if l := g.askLease(ctx, kv); l != 0 {
			g.foreign.put(sessionRef{p.Cell, owner}, l)
		}
	}
	for i, kv := range kvs {
		if n := nodes[i]; kv.Lease == 0 && n.Ephemeral && n.Owner != 0 {
			kv.Lease = g.foreign.get(sessionRef{p.Cell, n.Owner})
		}
	}
}

// askLease asks the other gateways for kv's lease: the first that
// answers kv's key (the same node: its create revision) with a lease.
func (g *Gateway) askLease(ctx context.Context, kv *mvccpb.KeyValue) int64 {
	for _, x := range g.peers.others() {
		conn, err := g.peers.conn(ctx, x)
		if err != nil || !ready(ctx, conn) {
			continue
		}
		var resp pb.RangeResponse
		if err := conn.Invoke(forwardContext(ctx), "/etcdserverpb.KV/Range", &pb.RangeRequest{Key: kv.Key}, &resp); err != nil {
			continue
		}
		for _, got := range resp.Kvs {
			if got.CreateRevision == kv.CreateRevision && got.Lease != 0 {
				return got.Lease
			}
		}
	}
	return 0
}
