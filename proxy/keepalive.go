package proxy

// A client's KeepAlive as this proxy answers it: held until the session
// has events, its wait ends or a batch confirms it, and answered with the
// lease's age and the grant to serve from cache.

import (
	"context"
	"crypto/subtle"
	"slices"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// kaWait is a client's KeepAlive held by the proxy.
type kaWait struct {
	ch         chan struct{} // closed when the session changed
	superseded bool          // a newer KeepAlive of the session took over
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
	ps, err := t.admitLocked(req, arrived)
	if err != nil {
		t.mu.Unlock()
		return api.SessionResponse{}, err
	}
	w := holdLocked(ps)
	clk := newKAClock(arrived, req.WaitMS, ps.leaseOrDefault())
	for {
		now := time.Now()
		switch step := nextKAStep(t.kaViewLocked(ps, w, clk, now)); step {
		case kaFailed, kaUnconfirmed, kaUnreachable:
			err := t.kaErrLocked(step, ps, req.Session, now)
			t.mu.Unlock()
			return api.SessionResponse{}, err
		case kaAwaitBatch:
			ps.awaitBatch = true
		case kaAnswer:
			resp := t.answerLocked(ps, w, arrived, now, cacheUntil, shared)
			t.mu.Unlock()
			return resp, nil
		}
		w = rearmLocked(ps, w)
		ch, until := w.ch, clk.holdUntil(ps.base.IsZero() || ps.awaitBatch)
		t.mu.Unlock()
		if err := holdFor(ctx, ch, until); err != nil {
			return api.SessionResponse{}, err
		}
		cacheUntil, shared = t.cacheUntil()
		t.mu.Lock()
	}
}

// admitLocked checks a client's KeepAlive against the session it renews
// and records what it says: the proxy's acknowledgement (if it names this
// instance), that the client is alive (the next batch renews the lease
// from arrived), and the client's acknowledgement; an urgent one, or a
// session not yet confirmed here, kicks an urgent batch.
func (t *cellTable) admitLocked(req api.KeepAliveRequest, arrived time.Time) (*proxySession, error) {
	ps := t.sessions[req.Session]
	if ps == nil {
		// Only a session the leader confirmed has an entry (adopt).
		return nil, api.Errorf(api.CodeUnavailable, "proxy: session %d is not renewed here; try again", req.Session)
	}
	if subtle.ConstantTimeCompare([]byte(ps.secret), []byte(req.Secret)) != 1 {
		return nil, api.Errorf(api.CodeUnauthorized, "wrong secret for session %d", req.Session)
	}
	if req.Proxy == t.instance {
		ps.knowsMe = true
		t.proxyAckLocked(ps, req.ProxyAck)
	}
	if ps.err != nil {
		return nil, ps.err
	}
	if arrived.After(ps.lastKA) {
		ps.lastKA = arrived
	}
	if ps.clientAck(ack{req.AckEpoch, req.AckSeq}, t.epoch) || ps.base.IsZero() {
		ps.urgent = true
		t.kickUrgent()
	}
	return ps, nil
}

// holdLocked holds a new KeepAlive of ps; one still held is answered as
// superseded.
func holdLocked(ps *proxySession) *kaWait {
	if old := ps.waiter; old != nil {
		old.superseded = true
		close(old.ch)
	}
	w := &kaWait{ch: make(chan struct{})}
	ps.waiter = w
	return w
}

// rearmLocked holds the KeepAlive again after a wake-up that answered
// its hold (the session changed): w, or a fresh one in its place.
func rearmLocked(ps *proxySession, w *kaWait) *kaWait {
	if ps.waiter == nil {
		w = &kaWait{ch: make(chan struct{})}
		ps.waiter = w
	}
	return w
}

// kaClock is a held KeepAlive's timing, fixed at its arrival: the end of
// its wait (deadline), how long past it a session not yet confirmed here,
// or one waiting for the batch that carries it, may be held (confirmBy),
// and for how long without an answer from the leader the cell counts as
// out of reach (stale).
type kaClock struct {
	arrived, deadline, confirmBy time.Time
	stale                        time.Duration
}

func newKAClock(arrived time.Time, waitMS int64, lease time.Duration) kaClock {
	wait := min(time.Duration(waitMS)*time.Millisecond, api.MaxKeepAliveWait, lease/2)
	deadline := arrived.Add(wait)
	// A session new here waits for its first batch past its wait, up to
	// what its client allows an attempt (the wait plus a margin).
	confirmBy := deadline.Add(max(lease/6, 500*time.Millisecond) - 100*time.Millisecond)
	return kaClock{arrived: arrived, deadline: deadline, confirmBy: confirmBy, stale: lease / 3}
}

// holdUntil is when a hold ends without a change: the wait's end, or
// confirmBy for a session waiting for a batch to confirm it.
func (c kaClock) holdUntil(awaitsBatch bool) time.Time {
	if awaitsBatch {
		return c.confirmBy
	}
	return c.deadline
}

// kaView is what decides a held KeepAlive's next step, read under the
// table's lock.
type kaView struct {
	clk       kaClock
	now       time.Time
	base      time.Time     // the session's confirmed base; zero: never confirmed here
	lastReply time.Time     // when the leader last answered a batch
	lease     time.Duration // the session's lease (or the default)
	failed    bool          // the session has ended (its err)
	// superseded: a newer KeepAlive of the session took over.
	superseded bool
	// awaitBatch: its wait is over and it waits for the batch that
	// carries it.
	awaitBatch bool
	// toDeliver: the session has events (the leader's or the proxy's)
	// its client has not acknowledged.
	toDeliver bool
	// behind: the client has yet to hear of the leader's epoch.
	behind bool
}

func (t *cellTable) kaViewLocked(ps *proxySession, w *kaWait, clk kaClock, now time.Time) kaView {
	return kaView{clk: clk, now: now, base: ps.base, lastReply: t.lastReply, lease: ps.leaseOrDefault(),
		failed: ps.err != nil, superseded: w.superseded, awaitBatch: ps.awaitBatch,
		toDeliver: len(ps.pending(t.epoch)) > 0 || len(ps.pevents) > 0, behind: ps.behind(t.epoch)}
}

// kaStep is what a held KeepAlive does next.
type kaStep int

const (
	kaHold        kaStep = iota // hold it until the session changes or its time is up
	kaFailed                    // refuse it with the session's error
	kaUnconfirmed               // refuse it: the session was not confirmed here in time
	kaUnreachable               // refuse it: the cell's leader does not answer this proxy
	kaAwaitBatch                // hold it for the batch that carries it
	kaAnswer                    // answer it
)

// nextKAStep decides a held KeepAlive's next step. Pure.
func nextKAStep(v kaView) kaStep {
	switch {
	case v.failed:
		return kaFailed
	case v.base.IsZero():
		if !v.now.Before(v.clk.confirmBy) || v.superseded {
			return kaUnconfirmed
		}
		return kaHold
	case v.now.Sub(later(v.lastReply, v.base)) > v.clk.stale && !v.now.Before(v.clk.deadline) && !v.awaitBatch:
		// This proxy cannot reach the cell's leader (no batch
		// answered, nor the session's open, for a third of its
		// lease; a long poll is answered within lease/12): the
		// client tries another proxy.
		return kaUnreachable
	case v.base.Before(v.clk.arrived) && v.clk.arrived.Sub(v.base) > v.lease/maxAnsweredLeaseAge && !v.now.Before(v.clk.deadline) && v.now.Before(v.clk.confirmBy) && !v.superseded &&
		!v.toDeliver && !mutant.On(mutant.AwaitBatch):
		// Its wait is over, but no batch that carried it has been
		// confirmed yet: the answer would date the lease from the
		// client's previous KeepAlive, over a quarter of the lease
		// ago. The batch built since its arrival answers within a
		// period; wait for it, up to what the client allows an
		// attempt. (A client on the cache's short poll, whose last
		// KeepAlive went in a recent batch, is answered at its wait's
		// end with that batch's age: its cache grant is renewed in
		// time, and its lease dated from a send a batch or two ago.)
		return kaAwaitBatch
	case v.toDeliver || !v.now.Before(v.clk.deadline) || v.superseded || v.behind:
		return kaAnswer
	}
	return kaHold
}

// kaErrLocked is the error a refusing step answers with.
func (t *cellTable) kaErrLocked(step kaStep, ps *proxySession, id uint64, now time.Time) error {
	switch step {
	case kaFailed:
		return ps.err
	case kaUnconfirmed:
		return api.Errorf(api.CodeUnavailable, "proxy: session %d not yet confirmed by cell %s", id, t.name)
	}
	return api.Errorf(api.CodeUnavailable, "proxy: no answer from cell %s's leader for %v", t.name, now.Sub(later(t.lastReply, ps.base)).Round(time.Millisecond))
}

// answerLocked is the KeepAlive's reply, and ends its hold: the events
// its client has not acknowledged, the lease's age at its arrival, and
// the grant to serve from cache.
func (t *cellTable) answerLocked(ps *proxySession, w *kaWait, arrived, now, cacheUntil time.Time, shared uint64) api.SessionResponse {
	if shared != 0 {
		t.sharedSessionLocked(shared)
	}
	resp := api.SessionResponse{Session: ps.id, LeaseMS: ps.leaseOrDefault().Milliseconds(), Epoch: t.epoch, Index: t.index,
		Events: slices.Clone(ps.pending(t.epoch)), LeaseAgeMS: max(arrived.Sub(ps.base), 0).Milliseconds(),
		Proxy: t.instance, ProxyEvents: slices.Clone(ps.pevents)}
	if mutant.On(mutant.LeaseAge) {
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
	return resp
}

// holdFor waits until ch closes (the session changed) or until; an error
// if ctx ends first (the proxy shuts down).
func holdFor(ctx context.Context, ch <-chan struct{}, until time.Time) error {
	timer := time.NewTimer(max(time.Until(until), time.Millisecond))
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
	case <-ctx.Done():
		return api.Errorf(api.CodeUnavailable, "proxy shutting down")
	}
	return nil
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
