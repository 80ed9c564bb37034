package proxy

// The proxy's watch table: one watch on its own session per path and kind
// (a sharedWatch), whatever index clients arm it at, with the clients
// waiting on it. A sharedWatch armed at index A fires for any change after
// A: it serves a client arming at since S >= A (a change between A and S
// fires it early, which only makes the client re-read); a client arming
// at S < A is told at once (the proxy has not watched (S, A]), and re-reads.
// A client waits on at most api.MaxProxyWatchesPerSession of them, a
// tenant's clients on at most api.MaxProxyWatchesPerTenant; past either,
// arming is refused limit_exceeded.
//
// Lock order as in shared.go: never call the sdk holding t.mu (a
// sdk.Watch's Stop takes its session's lock).

import (
	"context"
	"errors"
	"sync"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// watchKey is a watch as the proxy holds it: its path and kind (and, in
// the broken build only, the index a client chose).
type watchKey struct {
	path  string
	kind  api.WatchKind
	since uint64
}

func keyOf(path string, kind api.WatchKind, since uint64) watchKey {
	if !mutant.On(mutant.WatchKey) {
		since = 0
	}
	return watchKey{path, kind, since}
}

// sharedWatch is one watch on the proxy's session for every client
// waiting on its path and kind.
type sharedWatch struct {
	key   watchKey
	armed uint64 // it fires for any change after this index
	w     *sdk.Watch
	subs  map[uint64]*proxySession
	stop  chan struct{} // closed when no client waits on it any more
}

// watchQuota counts the watches the proxy holds per tenant (over all its
// cells). Its lock is taken last.
type watchQuota struct {
	mu  sync.Mutex
	per map[string]int
	// quotaOf is a tenant's own watch quota (0: none known), which the
	// proxy holds it to as well: the leader sees only the proxy's one
	// watch per path, never the tenant's.
	quotaOf func(tenant string) int
}

// limit is how many waits tenant may hold through the proxy.
func (q *watchQuota) limit(tenant string) int {
	n := api.MaxProxyWatchesPerTenant
	if q.quotaOf != nil && !mutant.On(mutant.ProxyWatchQuota) {
		if own := q.quotaOf(tenant); own > 0 {
			n = min(n, own)
		}
	}
	return n
}

func (q *watchQuota) take(tenant string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if tenant != "" && q.per[tenant] >= q.limit(tenant) {
		return false
	}
	q.per[tenant]++
	return true
}

func (q *watchQuota) give(tenant string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.per[tenant]--; q.per[tenant] <= 0 {
		delete(q.per, tenant)
	}
}

// subscribeLocked makes ps wait on sw, within its caps.
func (t *cellTable) subscribeLocked(ps *proxySession, sw *sharedWatch) error {
	if ps.watches[sw.key] == sw {
		return nil
	}
	if old := ps.watches[sw.key]; old != nil {
		t.unsubscribeLocked(ps, old)
	}
	if len(ps.watches) >= api.MaxProxyWatchesPerSession {
		return api.Errorf(api.CodeLimitExceeded, "session %d waits on %d watches through this proxy, limit %d", ps.id, len(ps.watches), api.MaxProxyWatchesPerSession)
	}
	if !t.quota.take(ps.tenant) {
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s waits on %d watches through this proxy: its quota", ps.tenant, t.quota.limit(ps.tenant))
	}
	sw.subs[ps.id] = ps
	ps.watches[sw.key] = sw
	t.m.clientWatches.Inc()
	return nil
}

// unsubscribeLocked ends ps's wait on sw; the last client out stops it.
func (t *cellTable) unsubscribeLocked(ps *proxySession, sw *sharedWatch) {
	if sw.subs[ps.id] != ps {
		return
	}
	delete(sw.subs, ps.id)
	delete(ps.watches, sw.key)
	t.quota.give(ps.tenant)
	t.m.clientWatches.Dec()
	if len(sw.subs) == 0 && t.watches[sw.key] == sw {
		delete(t.watches, sw.key)
		t.m.sharedWatches.Dec()
		close(sw.stop)
	}
}

// dropWatchesLocked ends every wait of a client the proxy forgets.
func (t *cellTable) dropWatchesLocked(ps *proxySession) {
	for _, sw := range ps.watches {
		t.unsubscribeLocked(ps, sw)
	}
}

// dropIfUnusedLocked stops a sharedWatch nobody waits on (its client
// left, or was refused).
func (t *cellTable) dropIfUnusedLocked(sw *sharedWatch) {
	if len(sw.subs) == 0 && t.watches[sw.key] == sw {
		delete(t.watches, sw.key)
		t.m.sharedWatches.Dec()
		close(sw.stop)
	}
}

// canSubscribeLocked refuses, before the cell is asked, a client whose
// n new watches (key the last) would pass its cap.
func (t *cellTable) canSubscribeLocked(ps *proxySession, key watchKey, n int) error {
	if ps.watches[key] != nil || len(ps.watches)+n <= api.MaxProxyWatchesPerSession {
		return nil
	}
	return api.Errorf(api.CodeLimitExceeded, "session %d waits on %d watches through this proxy, limit %d", ps.id, len(ps.watches), api.MaxProxyWatchesPerSession)
}

// installLocked offers w, armed at index armed, for key: it becomes the
// key's sharedWatch if there is none or it watches from further back
// (the clients of the one it replaces move to it). It returns the key's
// sharedWatch and the sdk watches now unused, to Stop once t.mu is
// released.
func (t *cellTable) installLocked(p *Proxy, key watchKey, w *sdk.Watch, armed uint64) (*sharedWatch, []*sdk.Watch) {
	cur := t.watches[key]
	if cur != nil && cur.armed <= armed {
		return cur, []*sdk.Watch{w}
	}
	sw := &sharedWatch{key: key, armed: armed, w: w, subs: map[uint64]*proxySession{}, stop: make(chan struct{})}
	t.watches[key] = sw
	if cur != nil {
		for id, ps := range cur.subs {
			sw.subs[id] = ps
			ps.watches[key] = sw
		}
		close(cur.stop) // its goroutine stops its sdk watch
	} else {
		t.m.sharedWatches.Inc()
	}
	p.wg.Add(1)
	go t.holdShared(p, sw)
	return sw, nil
}

// holdShared waits for sw to fire (then every client waiting on it gets
// the event) or for its last client to leave.
func (t *cellTable) holdShared(p *Proxy, sw *sharedWatch) {
	defer p.wg.Done()
	select {
	case ev, ok := <-sw.w.C:
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.watches[sw.key] != sw {
			return
		}
		delete(t.watches, sw.key)
		t.m.sharedWatches.Dec()
		if !ok || ev.Type == sdk.EventSessionExpired || ev.Type == sdk.EventSessionClosed {
			// The proxy's session ended, and its watches with it: the
			// clients re-read.
			ev = api.Event{Type: api.EventResync, Path: sw.key.path, Kind: sw.key.kind}
		}
		for _, ps := range sw.subs {
			delete(ps.watches, sw.key)
			t.quota.give(ps.tenant)
			t.m.clientWatches.Dec()
			if t.sessions[ps.id] == ps && ps.err == nil {
				t.pushLocked(ps, ev)
			}
		}
	case <-sw.stop:
		sw.w.Stop()
	case <-p.ctx.Done():
	}
}

// fireNowLocked tells a client at once that its watch may have fired: it
// armed it further back than the proxy watches from.
func (t *cellTable) fireNowLocked(ps *proxySession, key watchKey) {
	typ := api.EventDataChanged
	if key.kind == api.WatchChildren {
		typ = api.EventChildrenChanged
	}
	t.pushLocked(ps, api.Event{Type: typ, Path: key.path, Kind: key.kind})
}

// watchRead runs a client's watch-arming read on the proxy's session (its
// reply is the client's) and makes the client wait on the path and
// kind's sharedWatch.
func (p *Proxy) watchRead(ctx context.Context, t *cellTable, route string, req api.ReadRequest) ([]byte, error) {
	key := keyOf(req.Path, req.Watch, 0)
	t.mu.Lock()
	var pre error = errClientLeft
	if ps := t.liveClientLocked(req.Session); ps != nil {
		pre = t.canSubscribeLocked(ps, key, 1)
	}
	t.mu.Unlock()
	if pre != nil {
		return nil, pre
	}
	body, index, w, rerr := p.up.SharedWatchRead(ctx, t.name, route, api.ReadRequest{Path: req.Path, Watch: req.Watch})
	if rerr != nil {
		return nil, fromCell(rerr)
	}
	if mutant.On(mutant.WatchKey) {
		key = keyOf(req.Path, req.Watch, index)
	}
	t.mu.Lock()
	sw, unused := t.installLocked(p, key, w, index)
	rerr = error(errClientLeft)
	if ps := t.liveClientLocked(req.Session); ps != nil {
		rerr = t.subscribeLocked(ps, sw)
	}
	t.dropIfUnusedLocked(sw)
	t.mu.Unlock()
	for _, u := range unused {
		u.Stop()
	}
	if rerr != nil {
		return nil, rerr
	}
	return body, nil
}

// errClientLeft: the client is no longer a live client of this proxy.
var errClientLeft = api.Errorf(api.CodeUnavailable, "proxy: the session is not renewed through this proxy any more")

// errOwnSessionFull: the proxy's own session holds all the watches the
// cell allows it; the client's request is forwarded (its own session
// holds the watch).
var errOwnSessionFull = errors.New("the proxy's own session is full")

// fromCell maps an error of a call on the proxy's own session.
func fromCell(err error) error {
	if api.CodeOf(err) == api.CodeLimitExceeded {
		return errOwnSessionFull
	}
	return err
}

// rearm re-arms a client's watches (after it came to this proxy, or a
// fail-over), each as armed at its Since: one wait per path and kind.
func (p *Proxy) rearm(ctx context.Context, t *cellTable, req api.WatchRequest) (api.WatchResponse, error) {
	t.mu.Lock()
	ps := t.liveClientLocked(req.Session)
	if ps == nil {
		t.mu.Unlock()
		return api.WatchResponse{}, errClientLeft
	}
	specs, err := t.planRearmLocked(ps, req.Watches)
	t.mu.Unlock()
	if err != nil || len(specs) == 0 {
		return api.WatchResponse{}, err
	}
	ws, index, err := p.up.SharedRearm(ctx, t.name, specs)
	if err != nil {
		return api.WatchResponse{}, fromCell(err)
	}
	var unused []*sdk.Watch
	t.mu.Lock()
	ps = t.liveClientLocked(req.Session)
	err = nil
	for i, w := range ws {
		sw, u := t.installLocked(p, keyOf(specs[i].Path, specs[i].Kind, specs[i].Since), w, specs[i].Since)
		unused = append(unused, u...)
		switch {
		case ps == nil:
			err = errClientLeft
		case err == nil:
			err = t.subscribeLocked(ps, sw)
		}
		t.dropIfUnusedLocked(sw)
	}
	t.mu.Unlock()
	for _, u := range unused {
		u.Stop()
	}
	return api.WatchResponse{Index: index}, err
}

// planRearmLocked serves what the proxy already watches (one wait per path
// and kind, at the least Since the request asks for it) and returns the
// specs the cell must arm.
func (t *cellTable) planRearmLocked(ps *proxySession, specs []api.WatchSpec) ([]api.WatchSpec, error) {
	since := map[watchKey]uint64{}
	var order []watchKey
	for _, sp := range specs {
		k := keyOf(sp.Path, sp.Kind, sp.Since)
		if s, ok := since[k]; !ok || sp.Since < s {
			if !ok {
				order = append(order, k)
			}
			since[k] = sp.Since
		}
	}
	var arm []api.WatchSpec
	for _, k := range order {
		s := since[k]
		switch sw := t.watches[k]; {
		case sw != nil && sw.armed <= s:
			if err := t.subscribeLocked(ps, sw); err != nil {
				return nil, err
			}
		case sw != nil:
			// Armed further back than the proxy watches from.
			if ps.watches[k] == sw {
				t.unsubscribeLocked(ps, sw)
			}
			t.fireNowLocked(ps, k)
		default:
			if err := t.canSubscribeLocked(ps, k, len(arm)+1); err != nil {
				return nil, err
			}
			arm = append(arm, api.WatchSpec{Path: k.path, Kind: k.kind, Since: s})
		}
	}
	return arm, nil
}
