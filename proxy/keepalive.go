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

// heldKA is a client's KeepAlive the proxy holds until the session has
// events, its wait ends or a batch confirms it. A step at each change of
// its session (wakeLocked) and at its timer decides (nextKAStep), until one
// answers it. It waits in its caller's goroutine (keepAlive: kick wakes
// it), or parked, without one (keepAliveAsync: its timer runs the step,
// and reply takes the answer).
type heldKA struct {
	t       *cellTable
	ctx     context.Context // the proxy's: once it ends, so does the hold
	ps      *proxySession
	clk     kaClock
	session uint64
	kick    chan struct{} // a waiting caller's wake-up (capacity 1); nil when parked
	reply   func(api.SessionResponse, error)
	timer   *time.Timer // a parked hold's next step; under t.mu
	done    bool        // answered; under t.mu
	// superseded: a newer KeepAlive of the session took over; under t.mu.
	superseded bool
}

// kaShuttingDown is what a KeepAlive held as the proxy closes is answered.
var kaShuttingDown = api.Errorf(api.CodeUnavailable, "proxy shutting down")

// keepAlive answers a client's KeepAlive: it records the client's
// acknowledgement and that the client is alive (the next batch renews
// the lease from now), then answers once the session has events the
// client has not acknowledged or its wait ends. The reply's LeaseAgeMS
// tells the client how long before its request the lease it confirms
// began. It waits in its caller's goroutine.
func (t *cellTable) keepAlive(ctx context.Context, req api.KeepAliveRequest, arrived time.Time) (api.SessionResponse, error) {
	h, resp, until, err := t.hold(ctx, req, arrived, make(chan struct{}, 1), nil)
	for h != nil {
		timer := time.NewTimer(max(time.Until(until), time.Millisecond))
		select {
		case <-h.kick:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		h, resp, until, err = h.next()
	}
	return resp, err
}

// keepAliveAsync is keepAlive parked: a KeepAlive answered at once
// returns its answer (held false); one held is answered later by reply,
// once, from a goroutine of the proxy's.
func (t *cellTable) keepAliveAsync(ctx context.Context, req api.KeepAliveRequest, arrived time.Time, reply func(api.SessionResponse, error)) (resp api.SessionResponse, held bool, err error) {
	h, resp, _, err := t.hold(ctx, req, arrived, nil, reply)
	return resp, h != nil, err
}

// hold admits a client's KeepAlive and takes its first step: its answer,
// or the hold (non-nil) and when its wait ends unless woken.
func (t *cellTable) hold(ctx context.Context, req api.KeepAliveRequest, arrived time.Time, kick chan struct{}, reply func(api.SessionResponse, error)) (*heldKA, api.SessionResponse, time.Time, error) {
	t.m.keepAlives.Inc()
	// Read before the table's lock (the sdk's lock comes first): when the
	// proxy's own cache stops serving, so must its clients'.
	cacheUntil, shared := t.cacheUntil()
	t.mu.Lock()
	defer t.mu.Unlock()
	ps, err := t.admitLocked(req, arrived)
	if err != nil {
		return nil, api.SessionResponse{}, time.Time{}, err
	}
	h := &heldKA{t: t, ctx: ctx, ps: ps, clk: newKAClock(arrived, req.WaitMS, ps.leaseOrDefault()), session: req.Session, kick: kick, reply: reply}
	holdLocked(ps, h)
	if t.holds == nil {
		t.holds = map[*heldKA]struct{}{}
	}
	t.holds[h] = struct{}{}
	return h.stepLocked(time.Now(), cacheUntil, shared)
}

// next takes a held KeepAlive's next step: its answer (nil hold), or
// the hold again until.
func (h *heldKA) next() (*heldKA, api.SessionResponse, time.Time, error) {
	t := h.t
	cacheUntil, shared := t.cacheUntil()
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.done { // endHolds answered it
		return nil, api.SessionResponse{}, time.Time{}, kaShuttingDown
	}
	return h.stepLocked(time.Now(), cacheUntil, shared)
}

// step is a parked hold's next step (its timer's, or a wake-up's).
func (h *heldKA) step() {
	t := h.t
	cacheUntil, shared := t.cacheUntil()
	t.mu.Lock()
	if h.done {
		t.mu.Unlock()
		return
	}
	held, resp, _, err := h.stepLocked(time.Now(), cacheUntil, shared)
	t.mu.Unlock()
	if held == nil {
		h.reply(resp, err)
	}
}

// stepLocked decides the hold's next step: its answer (a nil hold), or a
// hold until the session changes or until (a parked one's timer is set
// for it).
func (h *heldKA) stepLocked(now, cacheUntil time.Time, shared uint64) (*heldKA, api.SessionResponse, time.Time, error) {
	t, ps := h.t, h.ps
	if h.ctx.Err() != nil {
		h.endLocked()
		return nil, api.SessionResponse{}, time.Time{}, kaShuttingDown
	}
	switch step := nextKAStep(t.kaViewLocked(ps, h, now)); step {
	case kaFailed, kaUnconfirmed, kaUnreachable:
		err := t.kaErrLocked(step, ps, h.session, now)
		h.endLocked()
		return nil, api.SessionResponse{}, time.Time{}, err
	case kaAwaitBatch:
		ps.awaitBatch = true
	case kaAnswer:
		resp := t.answerLocked(ps, h, now, cacheUntil, shared)
		h.endLocked()
		return nil, resp, time.Time{}, nil
	}
	if ps.waiter == nil { // woken: hold it again
		ps.waiter = h
	}
	until := h.clk.holdUntil(ps.base.IsZero() || ps.awaitBatch)
	if h.kick == nil {
		d := max(until.Sub(now), time.Millisecond)
		if h.timer == nil {
			h.timer = time.AfterFunc(d, h.step)
		} else {
			h.timer.Reset(d)
		}
	}
	return h, api.SessionResponse{}, until, nil
}

// wakeLocked takes the hold's next step soon (the session changed).
func (h *heldKA) wakeLocked() {
	switch {
	case h.done || mutant.On(mutant.ProxyKANoWake):
	case h.kick != nil:
		select {
		case h.kick <- struct{}{}:
		default: // a wake-up is pending
		}
	case h.timer != nil:
		h.timer.Reset(0)
	}
}

// endLocked ends the hold (its answer is on its way).
func (h *heldKA) endLocked() {
	h.done = true
	if h.ps.waiter == h {
		h.ps.waiter = nil
	}
	if h.ps.held == h {
		h.ps.held = nil
	}
	if h.timer != nil {
		h.timer.Stop()
	}
	delete(h.t.holds, h)
}

// endHolds answers every KeepAlive the table holds as the proxy closes:
// the parked ones (their connections are closed: the clients go on
// through another proxy), and those waiting in a caller's goroutine.
func (t *cellTable) endHolds() {
	t.mu.Lock()
	parked := make([]*heldKA, 0, len(t.holds))
	for h := range t.holds {
		h.endLocked()
		if h.kick != nil {
			select {
			case h.kick <- struct{}{}:
			default: // a wake-up is pending: it finds the hold done
			}
			continue
		}
		parked = append(parked, h)
	}
	t.mu.Unlock()
	for _, h := range parked {
		h.reply(api.SessionResponse{}, kaShuttingDown)
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

// holdLocked holds a new KeepAlive of ps, h; one still held (woken or
// not) is answered as superseded.
func holdLocked(ps *proxySession, h *heldKA) {
	if old := ps.held; old != nil {
		old.superseded = true
		old.wakeLocked()
	}
	ps.waiter, ps.held = h, h
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

func (t *cellTable) kaViewLocked(ps *proxySession, h *heldKA, now time.Time) kaView {
	return kaView{clk: h.clk, now: now, base: ps.base, lastReply: t.lastReply, lease: ps.leaseOrDefault(),
		failed: ps.err != nil, superseded: h.superseded, awaitBatch: ps.awaitBatch,
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
func (t *cellTable) answerLocked(ps *proxySession, h *heldKA, now, cacheUntil time.Time, shared uint64) api.SessionResponse {
	arrived := h.clk.arrived
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
	if ps.waiter == h {
		ps.waiter = nil
	}
	ps.awaitBatch = false
	return resp
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
