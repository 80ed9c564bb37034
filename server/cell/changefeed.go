package cell

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// The change feed (api.RouteChanges): reads of the leader's change ring
// after a ReadIndex, held (a long poll) while nothing under the root is
// new. A held read waits on a channel afterApply closes when an applied
// entry changes a path at or under its root, or when this replica stops
// leading: no polling.

// maxChangesRereads bounds how many times one held read reads the ring
// again after a wake that brought nothing it wanted (a change below its
// From); past it the read answers what it has.
const maxChangesRereads = 64

// changeWaiter is one held read.
type changeWaiter struct {
	root string
	ch   chan struct{} // closed once, by wake or wakeAll
}

// changeWaiters are a cell's held reads, at most api.MaxChangesWaiters.
// The zero value is ready.
type changeWaiters struct {
	n  atomic.Int32 // len(byWaiter): afterApply skips the lock when none
	mu sync.Mutex
	by map[*changeWaiter]struct{}
}

// arm registers a held read on root; false when the table is full.
func (t *changeWaiters) arm(root string) (*changeWaiter, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.by) >= api.MaxChangesWaiters {
		return nil, false
	}
	if t.by == nil {
		t.by = map[*changeWaiter]struct{}{}
	}
	w := &changeWaiter{root: root, ch: make(chan struct{})}
	t.by[w] = struct{}{}
	t.n.Store(int32(len(t.by)))
	return w, true
}

// disarm forgets w (woken or not).
func (t *changeWaiters) disarm(w *changeWaiter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drop(w)
}

// drop removes w, closing its channel if still open (t.mu held).
func (t *changeWaiters) drop(w *changeWaiter) {
	if _, ok := t.by[w]; !ok {
		return
	}
	delete(t.by, w)
	close(w.ch)
	t.n.Store(int32(len(t.by)))
}

// wake releases the held reads whose root is at or above a node an
// applied entry created, changed or deleted.
func (t *changeWaiters) wake(changes []fsm.Change) {
	if t.n.Load() == 0 || len(changes) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for w := range t.by {
		for _, ch := range changes {
			if nodeChange(ch.Type) && (ch.Path == w.root || strings.HasPrefix(ch.Path, w.root+"/")) {
				t.drop(w)
				break
			}
		}
	}
}

// wakeAll releases every held read (leadership lost).
func (t *changeWaiters) wakeAll() {
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for w := range t.by {
		t.drop(w)
	}
}

func nodeChange(t fsm.ChangeType) bool {
	return t == fsm.ChangeCreated || t == fsm.ChangeData || t == fsm.ChangeDeleted
}

// changesQuery reads the ring after a ReadIndex.
type changesQuery struct {
	root  string
	from  uint64
	limit int
}

func (q changesQuery) run(s *fsm.State) (api.ChangesResponse, error) {
	if err := s.CheckServes(q.root); err != nil {
		return api.ChangesResponse{}, err
	}
	page := s.ReadChanges(q.root, q.from, q.limit)
	return api.ChangesResponse{Changes: page.Changes, More: page.More, Floor: page.Floor, Index: s.Index(),
		Epoch: s.PrefixState(api.Prefix(q.root)).Epoch}, nil
}

// Changes reads the changes under req.Root at indexes >= req.From on
// the leader (its ring; not_leader elsewhere), holding the read up to
// wait while there are none: until a change under the root applies,
// this replica stops leading, wait passes or ctx ends. The caller
// checked the request and clamped limit and wait.
func (c *Cell) Changes(ctx context.Context, req api.ChangesRequest, limit int, wait time.Duration) (api.ChangesResponse, error) {
	if err := c.Ready(); err != nil {
		return api.ChangesResponse{}, err
	}
	q := changesQuery{root: req.Root, from: req.From, limit: limit}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for reread := 0; ; reread++ {
		var w *changeWaiter
		held := false
		if wait > 0 && reread < maxChangesRereads {
			w, held = c.changeWaiters.arm(req.Root) // before the read: a change between them wakes it
		}
		resp, err := read(ctx, c, q.run)
		if err != nil || len(resp.Changes) > 0 || !held {
			if held {
				c.changeWaiters.disarm(w)
			}
			return resp, err
		}
		select {
		case <-w.ch:
		case <-timer.C:
			c.changeWaiters.disarm(w)
			return resp, nil
		case <-ctx.Done():
			c.changeWaiters.disarm(w)
			return resp, nil
		}
		if c.Ready() != nil {
			return resp, nil // leadership lost: what it has
		}
	}
}

// rangeQuery is a range read.
type rangeQuery struct {
	req   api.RangeRequest
	limit int
}

func (q rangeQuery) run(s *fsm.State) (api.RangeResponse, error) {
	if err := s.CheckServes(q.req.Root); err != nil {
		return api.RangeResponse{}, err
	}
	resp, err := s.Range(q.req.Start, q.req.End, fsm.RangeOptions{Limit: q.limit, KeysOnly: q.req.KeysOnly,
		CountOnly: q.req.CountOnly, SkipContainers: q.req.SkipContainers, Root: q.req.Root})
	if err != nil {
		return api.RangeResponse{}, err
	}
	resp.Index, resp.Epoch = s.Index(), s.PrefixState(api.Prefix(q.req.Root)).Epoch
	return resp, nil
}

// rangesQuery is several range reads in one read of the state.
type rangesQuery struct {
	reqs   []api.RangeRequest
	limits []int
}

func (q rangesQuery) run(s *fsm.State) (api.RangesResponse, error) {
	spans := make([]fsm.RangeSpan, len(q.reqs))
	for i, r := range q.reqs {
		if err := s.CheckServes(r.Root); err != nil {
			return api.RangesResponse{}, err
		}
		spans[i] = fsm.RangeSpan{Start: r.Start, End: r.End, Opt: fsm.RangeOptions{Limit: q.limits[i], KeysOnly: r.KeysOnly,
			CountOnly: r.CountOnly, SkipContainers: r.SkipContainers, Root: r.Root}}
	}
	reads, err := s.Ranges(spans)
	if err != nil {
		return api.RangesResponse{}, err
	}
	out := api.RangesResponse{Reads: reads, Index: s.Index()}
	if len(q.reqs) > 0 {
		out.Epoch = s.PrefixState(api.Prefix(q.reqs[0].Root)).Epoch
	}
	for i := range out.Reads {
		out.Reads[i].Index, out.Reads[i].Epoch = out.Index, out.Epoch
	}
	return out, nil
}

// Ranges is Range of every request in one linearizable read: every
// answer at one index. The caller checked each span lies under its Root,
// every Root in one prefix, and clamped limits (one per request).
func (c *Cell) Ranges(ctx context.Context, reqs []api.RangeRequest, limits []int) (api.RangesResponse, error) {
	return read(ctx, c, rangesQuery{reqs: reqs, limits: limits}.run)
}

// Range is a linearizable read of the nodes in [req.Start, req.End)
// (a ReadIndex, as Get). The caller checked the span lies under
// req.Root and clamped limit.
func (c *Cell) Range(ctx context.Context, req api.RangeRequest, limit int) (api.RangeResponse, error) {
	return read(ctx, c, rangeQuery{req: req, limit: limit}.run)
}
