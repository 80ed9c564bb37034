package proxy

// A cell's sessions as this proxy renews them: its clients' KeepAlives end
// here, and the proxy renews them all with one batch per second to the
// cell's leader (a long poll that also brings their events), plus an
// urgent batch when a session is new here or acknowledges an
// invalidation a write is waiting for.

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

const (
	// batchWait is how long the leader holds the main batch (it answers
	// at once when a session has an event): one batch per cell and second
	// with the default 12 s lease. A cell whose sessions have shorter
	// leases gets lease/12 (at least minBatchWait), so a client's lease is
	// confirmed within a sixth of it.
	batchWait    = time.Second
	minBatchWait = 100 * time.Millisecond
	// minBatchGap spaces main batches when events end them early.
	minBatchGap = 10 * time.Millisecond
	// urgentGather lets urgent sessions arriving together share a batch.
	urgentGather = 2 * time.Millisecond
	// maxAnsweredLeaseAge: a KeepAlive whose wait is over is answered at
	// once if the lease it confirms (its session's last confirmed batch)
	// is under lease/maxAnsweredLeaseAge old; an older one waits for the
	// batch that carries it.
	maxAnsweredLeaseAge = 4
	// forgetAfter drops a session whose client has been silent this long
	// past its lease (it moved to another proxy, or is gone).
	forgetAfter = 30 * time.Second
)

// errNothing: no session to renew.
var errNothing = errors.New("no sessions")

// kaWait is a client's KeepAlive held by the proxy.
type kaWait struct {
	ch         chan struct{} // closed when the session changed
	superseded bool          // a newer KeepAlive of the session took over
}

// cellTable is one cell's sessions on this proxy.
type cellTable struct {
	name  string
	proxy string // this proxy's name: the leader tells it of its sessions' events
	up    *sdk.Client
	m     *metrics
	// live reports whether a tenant still holds a token (nil: all do);
	// the sessions of one that does not are not renewed.
	live func(tenant string) bool

	mu       sync.Mutex
	sessions map[uint64]*proxySession
	epoch    uint64
	index    uint64
	lastOK   time.Time // when the last confirmed batch was built
	// lastReply is when the leader last answered a batch: the proxy
	// reaches the cell (a long poll is answered within its wait).
	lastReply time.Time
	batches   uint64

	kick chan struct{} // an urgent batch is wanted

	// The shared cache (shared.go): cachers are the clients the proxy
	// served each path to as cacheable; gen rises with every
	// invalidation and fail-over (a read that began under another gen
	// is not made cacheable); acked is closed at a client's next
	// acknowledgement.
	instance string
	// sharedCache reads the proxy's own session on the cell: its id and
	// the cache window it has left; sharedID is the one the last grant
	// counted from.
	sharedCache func(cell string) (session uint64, left time.Duration)
	sharedID    uint64
	cachers     map[string]map[uint64]struct{}
	// lapses counts, per tenant, its clients whose grant ran out with an
	// invalidation unacknowledged: at api.MaxCacheMissesPerTenant none
	// of its clients is served cacheable on this cell again (a new
	// session per write does not renew the attack), as at the leader.
	lapses      map[string]int
	flights     map[string]*flight // reads of the shared cache under way, by path
	nextFlights map[string]*flight // the next ones, collecting reads
	gen         uint64
	acked       chan struct{}
	ctx         context.Context
	// watches are the shared watches by path and kind (watches.go);
	// quota counts its clients' waits per tenant (the proxy's, over all
	// cells).
	watches map[watchKey]*sharedWatch
	quota   *watchQuota
}

func newCellTable(ctx context.Context, name, proxy, instance string, up *sdk.Client, m *metrics) *cellTable {
	t := &cellTable{name: name, proxy: proxy, up: up, m: m, sessions: map[uint64]*proxySession{}, kick: make(chan struct{}, 1),
		watches: map[watchKey]*sharedWatch{}, quota: &watchQuota{per: map[string]int{}},
		instance: instance, cachers: map[string]map[uint64]struct{}{}, lapses: map[string]int{}, flights: map[string]*flight{}, nextFlights: map[string]*flight{}, ctx: ctx}
	if up != nil {
		t.sharedCache = up.SharedCache
	}
	return t
}

// forgetLocked drops a session from the table.
func (t *cellTable) forgetLocked(ps *proxySession) {
	if t.sessions[ps.id] == ps {
		delete(t.sessions, ps.id)
		for path := range ps.cached {
			if set := t.cachers[path]; set != nil {
				delete(set, ps.id)
				if len(set) == 0 {
					delete(t.cachers, path)
				}
			}
		}
		t.dropWatchesLocked(ps)
		if ps.gone != nil {
			close(ps.gone)
		}
		t.notifyAcksLocked()
	}
}

func (t *cellTable) kickUrgent() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// wakeLocked answers the session's held KeepAlive.
func (t *cellTable) wakeLocked(ps *proxySession) {
	if w := ps.waiter; w != nil {
		close(w.ch)
		ps.waiter = nil
	}
}

// run sends the main batches until ctx ends: a full one (every session)
// once a period, each held by the leader until one of this proxy's
// sessions has an event or the period ends; after an event, polls with
// only what there is to acknowledge until the next full one is due.
func (t *cellTable) run(ctx context.Context) {
	period := batchWaitFor(t.prune(time.Now()))
	var lastFull time.Time
	for ctx.Err() == nil {
		start := time.Now()
		kind, wait := fullBatch, period
		if due := lastFull.Add(period); start.Before(due) {
			kind, wait = pollBatch, due.Sub(start)
		}
		built, err := t.send(ctx, kind, wait)
		if kind == fullBatch && err == nil {
			lastFull = built
		}
		period = batchWaitFor(t.prune(time.Now()))
		pause := minBatchGap - time.Since(start)
		switch {
		case errors.Is(err, errNothing):
			pause = period
		case err != nil:
			pause = 200 * time.Millisecond
		}
		if pause > 0 {
			sleep(ctx, pause)
		}
	}
}

// runUrgent sends urgent batches (no wait at the leader) when kicked.
func (t *cellTable) runUrgent(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		}
		sleep(ctx, urgentGather)
		if _, err := t.send(ctx, urgentBatch, 0); err != nil && !errors.Is(err, errNothing) {
			sleep(ctx, 50*time.Millisecond)
		}
	}
}

// send builds one batch of kind, sends it (in parts of at most
// api.MaxProxyBatchSessions sessions and api.MaxProxyBatchBytes, at once)
// and applies each part's reply; it returns when the batch was built (its
// renewals count from then).
func (t *cellTable) send(ctx context.Context, kind batchKind, wait time.Duration) (time.Time, error) {
	t.mu.Lock()
	built := time.Now()
	req, items, ended := buildBatch(t.name, t.proxy, t.epoch, t.sessions, built, kind, wait, t.live)
	for _, ps := range ended {
		t.wakeLocked(ps)
	}
	none := len(t.sessions) == 0
	t.mu.Unlock()
	if none || (len(items) == 0 && kind != pollBatch) {
		return built, errNothing
	}
	t.m.batchSessions.WithLabelValues(t.name).Set(float64(len(items)))
	parts := splitBatch(req, items, api.MaxProxyBatchSessions, api.MaxProxyBatchBytes)
	if len(parts) == 1 {
		return built, t.sendPart(ctx, kind, built, parts[0], 0)
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = t.sendPart(ctx, kind, built, part, 0)
		}()
	}
	wg.Wait()
	return built, errors.Join(errs...)
}

// maxSplitDepth bounds the halving of a refused batch: a part of
// api.MaxProxyBatchSessions reaches single sessions within it.
const maxSplitDepth = 16

// sendPart sends one part of a batch and applies its reply. The call,
// retries included, is bounded (the leader's wait + api.ProxyBatchTimeout):
// a part that fails is not resent as it was; the next batch is built
// afresh. A part the leader refuses as a whole (its content, not the
// cell's state) is sent again in halves, and a single session so refused
// ends here: one bad session never stalls the others.
func (t *cellTable) sendPart(ctx context.Context, kind batchKind, built time.Time, part batchPart, depth int) error {
	body, err := json.Marshal(part.req)
	if err != nil {
		return err
	}
	if len(body) > api.MaxProxyBatchBytes && len(part.items) > 1 && !brokenBatchSplit {
		return t.sendHalves(ctx, kind, built, part, depth)
	}
	t.m.batches.WithLabelValues(t.name).Inc()
	wait := time.Duration(part.req.WaitMS) * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, wait+api.ProxyBatchTimeout)
	if brokenBatchSplit {
		cctx, cancel = context.WithCancel(ctx) // resent until it goes through
	}
	raw, err := t.up.Forward(cctx, t.name, api.RouteKeepAliveBatch, body, sdk.ForwardOptions{
		KeepAlive: true, RetryUnsure: true, Timeout: wait + 3*time.Second, Own: true})
	cancel()
	if err == nil {
		var resp api.KeepAliveBatchResponse
		if err = json.Unmarshal(raw, &resp); err == nil {
			t.applyPart(built, part, resp)
			return nil
		}
	}
	t.m.batchErrors.WithLabelValues(t.name).Inc()
	if refusedWhole(err) && !brokenBatchSplit {
		if len(part.items) > 1 && depth < maxSplitDepth {
			return t.sendHalves(ctx, kind, built, part, depth)
		}
		t.dropRefused(part, err)
		return err
	}
	if kind == urgentBatch {
		t.mu.Lock()
		for _, it := range part.items {
			it.ps.urgent = true
		}
		t.mu.Unlock()
	}
	return err
}

// sendHalves sends a part again as two, without a wait at the leader.
func (t *cellTable) sendHalves(ctx context.Context, kind batchKind, built time.Time, part batchPart, depth int) error {
	part.req.WaitMS = 0
	var errs []error
	for _, h := range part.halves() {
		errs = append(errs, t.sendPart(ctx, kind, built, h, depth+1))
	}
	return errors.Join(errs...)
}

// refusedWhole: the leader refused a batch for what it carries (a
// request that cannot succeed as it is), not for the cell's state.
func refusedWhole(err error) bool {
	switch api.CodeOf(err) {
	case api.CodeBadRequest, api.CodeValueTooLarge, api.CodeLimitExceeded:
		return true
	}
	return false
}

// dropRefused ends the sessions of a part the leader refused as a whole
// (at most one, once halved): their clients are told why.
func (t *cellTable) dropRefused(part batchPart, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, it := range part.items {
		if it.ps.err == nil {
			it.ps.err = api.Errorf(api.CodeBadRequest, "the cell refused to renew session %d through this proxy: %v", it.ps.id, err)
			t.wakeLocked(it.ps)
		}
	}
}

// applyPart applies a part's reply.
func (t *cellTable) applyPart(built time.Time, part batchPart, resp api.KeepAliveBatchResponse) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ps := range applyReply(&t.epoch, t.sessions, part.items, resp) {
		t.wakeLocked(ps)
	}
	t.index = max(t.index, resp.Index)
	if len(part.items) > 0 && built.After(t.lastOK) {
		t.lastOK = built
	}
	t.lastReply = time.Now()
	t.batches++
}

// batchWait is the main batch's wait for sessions whose shortest lease is
// minLease.
func batchWaitFor(minLease time.Duration) time.Duration {
	return max(min(batchWait, minLease/12), minBatchWait)
}

// prune forgets sessions whose clients are long gone, and returns the
// shortest lease of the rest.
func (t *cellTable) prune(now time.Time) (minLease time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	minLease = api.DefaultLease
	for _, ps := range t.sessions {
		if ps.waiter == nil && now.Sub(ps.lastKA) > ps.leaseOrDefault()+forgetAfter {
			t.forgetLocked(ps)
			continue
		}
		minLease = min(minLease, ps.leaseOrDefault())
	}
	return minLease
}

// opened records a session its client opened through this proxy: the
// leader's lease began after the open reached the proxy.
func (t *cellTable) opened(id uint64, secret string, lease time.Duration, arrived time.Time, tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.sessions[id]
	if ps == nil {
		ps = newProxySession(id)
		t.sessions[id] = ps
	}
	ps.lease, ps.lastKA, ps.base, ps.err = lease, arrived, arrived, nil
	ps.secret, ps.tenant = secret, tenant // the cell's own reply
}

// adopt records a session new to this proxy whose KeepAlive the leader
// just accepted (its secret with it): the next urgent batch confirms it
// here. A session already known is left as it is.
func (t *cellTable) adopt(id uint64, secret, tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessions[id] != nil {
		return
	}
	ps := newProxySession(id)
	ps.secret, ps.tenant = secret, tenant
	t.sessions[id] = ps
}

// owner is the tenant of a session this proxy renews, and whether it does.
func (t *cellTable) owner(id uint64) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.sessions[id]
	if ps == nil {
		return "", false
	}
	return ps.tenant, true
}

// closed forgets a session its client closed (with its secret: the
// cell refuses a close without it, and so does the proxy).
func (t *cellTable) closed(id uint64, secret string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ps := t.sessions[id]; ps != nil && subtle.ConstantTimeCompare([]byte(ps.secret), []byte(secret)) == 1 {
		ps.err = api.Errorf(api.CodeSessionExpired, "session %d closed", id)
		t.wakeLocked(ps)
		t.forgetLocked(ps)
	}
}

// keepAlive answers a client's KeepAlive: it records the client's
// acknowledgement and that the client is alive (the next batch renews
// the lease from now), then answers once the session has events the
// client has not acknowledged or its wait ends. The reply's LeaseAgeMS
// tells the client how long before its request the lease it confirms
// began.
func (t *cellTable) keepAlive(ctx context.Context, req api.KeepAliveRequest, arrived time.Time) (api.SessionResponse, error) {
	t.m.keepAlives.Inc()
	// Read before the table's lock (the sdk's lock comes first): when the
	// proxy's own cache stops serving, so must its clients'.
	cacheUntil, shared := t.cacheUntil()
	t.mu.Lock()
	ps := t.sessions[req.Session]
	if ps == nil {
		// Only a session the leader confirmed has an entry (adopt).
		t.mu.Unlock()
		return api.SessionResponse{}, api.Errorf(api.CodeUnavailable, "proxy: session %d is not renewed here; try again", req.Session)
	}
	if subtle.ConstantTimeCompare([]byte(ps.secret), []byte(req.Secret)) != 1 {
		t.mu.Unlock()
		return api.SessionResponse{}, api.Errorf(api.CodeUnauthorized, "wrong secret for session %d", req.Session)
	}
	if req.Proxy == t.instance {
		ps.knowsMe = true
		t.proxyAckLocked(ps, req.ProxyAck)
	}
	if ps.err != nil {
		err := ps.err
		t.mu.Unlock()
		return api.SessionResponse{}, err
	}
	if arrived.After(ps.lastKA) {
		ps.lastKA = arrived
	}
	if ps.clientAck(ack{req.AckEpoch, req.AckSeq}, t.epoch) || ps.base.IsZero() {
		ps.urgent = true
		t.kickUrgent()
	}
	if old := ps.waiter; old != nil {
		old.superseded = true
		close(old.ch)
	}
	w := &kaWait{ch: make(chan struct{})}
	ps.waiter = w
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxKeepAliveWait, ps.leaseOrDefault()/2)
	deadline := arrived.Add(wait)
	// A session new here waits for its first batch past its wait, up to
	// what its client allows an attempt (the wait plus a margin).
	confirmBy := deadline.Add(max(ps.leaseOrDefault()/6, 500*time.Millisecond) - 100*time.Millisecond)
	stale := ps.leaseOrDefault() / 3
	for {
		now := time.Now()
		switch {
		case ps.err != nil:
			err := ps.err
			t.mu.Unlock()
			return api.SessionResponse{}, err
		case ps.base.IsZero():
			if !now.Before(confirmBy) || w.superseded {
				t.mu.Unlock()
				return api.SessionResponse{}, api.Errorf(api.CodeUnavailable, "proxy: session %d not yet confirmed by cell %s", req.Session, t.name)
			}
		case now.Sub(later(t.lastReply, ps.base)) > stale && !now.Before(deadline) && !ps.awaitBatch:
			// This proxy cannot reach the cell's leader (no batch
			// answered, nor the session's open, for a third of its
			// lease; a long poll is answered within lease/12): the
			// client tries another proxy.
			t.mu.Unlock()
			return api.SessionResponse{}, api.Errorf(api.CodeUnavailable, "proxy: no answer from cell %s's leader for %v", t.name, now.Sub(later(t.lastReply, ps.base)).Round(time.Millisecond))
		case ps.base.Before(arrived) && arrived.Sub(ps.base) > ps.leaseOrDefault()/maxAnsweredLeaseAge && !now.Before(deadline) && now.Before(confirmBy) && !w.superseded &&
			len(ps.pending(t.epoch)) == 0 && len(ps.pevents) == 0 && !brokenAwaitBatch:
			// Its wait is over, but no batch that carried it has been
			// confirmed yet: the answer would date the lease from the
			// client's previous KeepAlive, over a quarter of the lease
			// ago. The batch built since its arrival answers within a
			// period; wait for it, up to what the client allows an
			// attempt. (A client on the cache's short poll, whose last
			// KeepAlive went in a recent batch, is answered at its wait's
			// end with that batch's age: its cache grant is renewed in
			// time, and its lease dated from a send a batch or two ago.)
			ps.awaitBatch = true
		case len(ps.pending(t.epoch)) > 0 || len(ps.pevents) > 0 || !now.Before(deadline) || w.superseded || ps.behind(t.epoch):
			if shared != 0 {
				t.sharedSessionLocked(shared)
			}
			resp := api.SessionResponse{Session: ps.id, LeaseMS: ps.leaseOrDefault().Milliseconds(), Epoch: t.epoch, Index: t.index,
				Events: slices.Clone(ps.pending(t.epoch)), LeaseAgeMS: max(arrived.Sub(ps.base), 0).Milliseconds(),
				Proxy: t.instance, ProxyEvents: slices.Clone(ps.pevents)}
			if brokenLeaseAge {
				resp.LeaseAgeMS = 0
			}
			// The grant to serve from cache: what is left of the proxy's
			// own, recorded with the events it goes with.
			// Counted from the request's arrival, which the client's
			// send precedes: the client's grant ends before the proxy's.
			// While an invalidation passed to the client is
			// unacknowledged, the grant is not extended: the proxy's
			// acknowledgement waits for it at most until the grant it has.
			if until := ps.grantCap(cacheUntil); until.After(now) {
				resp.CacheMS = until.Sub(arrived).Milliseconds()
				ps.grantUntil = later(ps.grantUntil, until)
			}
			if ps.waiter == w {
				ps.waiter = nil
			}
			ps.awaitBatch = false
			t.mu.Unlock()
			return resp, nil
		}
		if ps.waiter == nil {
			w = &kaWait{ch: make(chan struct{})}
			ps.waiter = w
		}
		ch := w.ch
		until := deadline
		if ps.base.IsZero() || ps.awaitBatch {
			until = confirmBy
		}
		t.mu.Unlock()
		timer := time.NewTimer(max(time.Until(until), time.Millisecond))
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return api.SessionResponse{}, api.Errorf(api.CodeUnavailable, "proxy shutting down")
		}
		timer.Stop()
		cacheUntil, shared = t.cacheUntil()
		t.mu.Lock()
	}
}

// cacheUntil is when the proxy's own session on the cell stops serving
// its cache. Never call it holding t.mu.
func (t *cellTable) cacheUntil() (time.Time, uint64) {
	now := time.Now()
	if t.sharedCache == nil {
		return now, 0
	}
	id, left := t.sharedCache(t.name)
	return now.Add(left), id
}

// status is the table's part of the proxy's status.
func (t *cellTable) status(now time.Time) api.ProxyCellStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := api.ProxyCellStatus{Cell: t.name, Epoch: t.epoch, Sessions: len(t.sessions), Batches: t.batches, LastBatchAgeMS: -1}
	if !t.lastOK.IsZero() {
		st.LastBatchAgeMS = now.Sub(t.lastOK).Milliseconds()
	}
	return st
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
