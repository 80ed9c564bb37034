package etcdgw

import (
	"context"
	"errors"
	"sort"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Reads at a past revision (docs/etcd.md, "Revisions"). A revision is
// the whole cell's log index, so a read at revision R < now (etcd's STM
// reads every key at its first read's revision) is served by
// reconstructing the span at R from the current read (index I) and the
// cell's change ring. Per key of the span, the earliest ring change in
// (R, I] decides its state at R:
//   - a delete: the key was the node the delete carries (as it was);
//   - a put that created the node (CreateIndex = its index): missing;
//   - a put of an existing node: the latest ring change to the key at an
//     index <= R (a put: that node; a delete: missing), if the ring
//     still holds one; else the answer is compacted.
//
// A key with no change in (R, I] is as the current read says; a
// container is never a key. A ring that does not cover (R, I] (Floor
// above R+1), another epoch, or more than MaxPastReadChanges changes to
// read: compacted. The ring is read with the proxy's own credentials:
// the caller's read on the span's root was checked by the range read
// done with the caller's token, and only the span's changes are used.

// Bounds of a read at a past revision.
const (
	// MaxPastReadChanges bounds the ring changes one past read reads
	// (both passes, re-reads included): a whole ring's worth
	// (api.MaxChangeRing). Past it the read answers compacted.
	MaxPastReadChanges = api.MaxChangeRing
	// maxPastReadCalls bounds the RouteChanges reads of one past read:
	// MaxPastReadChanges in reads of api.MaxChangesPerRead, twice (two
	// passes), with room for reads that bring nothing new.
	maxPastReadCalls = 2*MaxPastReadChanges/api.MaxChangesPerRead + 8
)

// errPastCompacted: the ring cannot tell the span's state at the
// revision asked (answered as etcd's compacted).
var errPastCompacted = errors.New("the change ring no longer covers the revision asked")

// readAt serves r's revision on resp, the current read of sp: as it is
// (no revision, or the current one), refused (a future revision, another
// epoch, beyond the ring), or reconstructed at the past revision. A
// past read needs the whole span: a read that was limited is redone
// whole (plan.whole, which then filters, sorts and limits).
func (g *Gateway) readAt(ctx context.Context, w who, sp keySpan, r *pb.RangeRequest, plan rangePlan, keysOnly bool, resp api.RangeResponse) (api.RangeResponse, rangePlan, error) {
	if err := checkRevision(r.Revision, resp.Epoch, resp.Index); err == nil || r.Revision > rev(resp.Epoch, resp.Index) {
		return resp, plan, err // the current revision, none, or a future one
	}
	epoch, at := unrev(r.Revision)
	if epoch != resp.Epoch {
		return resp, plan, rpctypes.ErrGRPCCompacted
	}
	if !plan.whole {
		plan = rangePlan{fetch: MaxSortFetch, whole: true, order: plan.order}
		again, err := g.readSpan(ctx, w, sp, rangeOpts{limit: plan.fetch, keysOnly: keysOnly})
		if err != nil {
			return resp, plan, grpcError(err)
		}
		if again.Epoch != epoch {
			return resp, plan, rpctypes.ErrGRPCCompacted
		}
		resp = again
	}
	if resp.More {
		return resp, plan, nil // too large to read whole: rangeAs refuses it
	}
	nodes, err := g.pastNodes(ctx, sp, resp.Nodes, epoch, at, resp.Index)
	switch {
	case errors.Is(err, errPastCompacted), err != nil && permanentFeedError(err):
		return resp, plan, rpctypes.ErrGRPCCompacted
	case err != nil:
		return resp, plan, grpcError(err)
	}
	resp.Nodes, resp.Count = nodes, len(nodes)
	return resp, plan, nil
}

// pastNodes is the span's keys at index at (sorted by path), from the
// current read's nodes (at index now) and the ring.
func (g *Gateway) pastNodes(ctx context.Context, sp keySpan, current []api.Node, epoch, at, now uint64) ([]api.Node, error) {
	if mutant.On(mutant.EtcdPastRead) {
		return current, nil // broken: the current state answered as the state at R
	}
	budget := MaxPastReadChanges
	first := make(map[string]api.Change) // the earliest change in (at, now] per path of the span
	err := g.scanRing(ctx, ringScan{root: sp.Root, from: at + 1, through: now, epoch: epoch}, &budget, func(c api.Change) {
		if _, seen := first[c.Node.Path]; !seen && c.Index > at && inSpan(c.Node.Path, sp.Start, sp.End) {
			first[c.Node.Path] = c
		}
	})
	if err != nil {
		return nil, err
	}
	then := make(map[string]*api.Node, len(first)) // path -> its key at `at` (nil: none)
	need := make(map[string]bool)                  // paths whose state at `at` is an earlier ring change
	for p, c := range first {
		switch {
		case c.Kind == api.ChangeDelete:
			then[p] = keyOf(c)
		case c.Node.CreateIndex == c.Index:
			then[p] = nil
		default:
			need[p] = true
		}
	}
	if len(need) > 0 {
		if err := g.priorStates(ctx, sp.Root, epoch, at, need, then, &budget); err != nil {
			return nil, err
		}
	}
	return mergePast(current, first, then), nil
}

// priorStates sets then[p] for every path in need to its latest ring
// change at an index <= at (the ring read from its Floor):
// errPastCompacted if the ring holds none for one of them.
func (g *Gateway) priorStates(ctx context.Context, root string, epoch, at uint64, need map[string]bool, then map[string]*api.Node, budget *int) error {
	latest := make(map[string]api.Change, len(need))
	err := g.scanRing(ctx, ringScan{root: root, from: 1, through: at, epoch: epoch, fromFloor: true}, budget, func(c api.Change) {
		if need[c.Node.Path] {
			latest[c.Node.Path] = c
		}
	})
	if err != nil {
		return err
	}
	for p := range need {
		c, ok := latest[p]
		if !ok {
			return errPastCompacted
		}
		if c.Kind == api.ChangePut {
			then[p] = keyOf(c)
		} else {
			then[p] = nil
		}
	}
	return nil
}

// keyOf is the key a put or delete change carries (nil for a container:
// not a key).
func keyOf(c api.Change) *api.Node {
	if c.Node.Container {
		return nil
	}
	n := c.Node
	return &n
}

// mergePast is the span at `at`: the current keys no change touched
// since, and the keys then says (paths first names), in path order.
func mergePast(current []api.Node, first map[string]api.Change, then map[string]*api.Node) []api.Node {
	out := make([]api.Node, 0, len(current)+len(then))
	for _, n := range current {
		if _, changed := first[n.Path]; !changed && isKey(&n) {
			out = append(out, n)
		}
	}
	for _, n := range then {
		if n != nil {
			out = append(out, *n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// ringScan is one pass over the ring: the changes under root at indexes
// from..through, of the prefix's epoch. fromFloor: from may lie below
// the ring's Floor (the pass reads whatever the ring still holds);
// otherwise a Floor above from is a gap (errPastCompacted).
type ringScan struct {
	root          string
	from, through uint64
	epoch         uint64
	fromFloor     bool
}

// scanRing hands s's changes to fn in index order (a change may come
// twice: a read cut by More is read again from its last index; fn must
// not mind), spending budget.
func (g *Gateway) scanRing(ctx context.Context, s ringScan, budget *int, fn func(api.Change)) error {
	from := s.from
	for calls := 0; calls < maxPastReadCalls; calls++ {
		if *budget <= 0 {
			return errPastCompacted
		}
		var resp api.ChangesResponse
		req := &api.ChangesRequest{Root: s.root, From: from, Limit: min(*budget, api.MaxChangesPerRead)}
		if err := g.be.CallOwn(ctx, api.RouteChanges, req, &resp); err != nil {
			return err
		}
		if resp.Epoch != s.epoch || (resp.Floor > from && !(s.fromFloor && calls == 0)) {
			return errPastCompacted
		}
		*budget -= len(resp.Changes)
		for _, c := range resp.Changes {
			if c.Index > s.through {
				return nil
			}
			fn(c)
		}
		switch {
		case !resp.More && resp.Index >= s.through:
			return nil
		case !resp.More:
			from = max(from, resp.Index+1)
		case len(resp.Changes) == 0:
			return errPastCompacted // More with nothing: not an answer to build on
		case resp.Changes[len(resp.Changes)-1].Index <= from:
			return errPastCompacted // more changes at one index than one read carries
		default:
			from = resp.Changes[len(resp.Changes)-1].Index
		}
	}
	return errPastCompacted
}
