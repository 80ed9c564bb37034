package sdk

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// A request sent to a process that stopped without closing its
// connections (its machine gone, the process paused or frozen, a network
// that drops everything) is answered by nothing: before this, the SDK
// waited its whole attempt timeout (DefaultRequestTimeout, 5 s) before
// trying another replica, so a hung leader cost a Lock 5 s where the
// election took 1–2 s (lockbench run failover --failover-fault pause:
// 5.02 s in each of 30 trials). A killed process is different: its
// kernel resets the connections and the next attempt goes at once.
//
// So while an attempt waits, the client watches its endpoint: once
// nothing at all has been read from it (on any connection, a reply,
// a long poll's answer) for HungAfter, the client sends it one probe
// (GET /healthz, which lockd and lockproxy answer from their HTTP layer,
// no Raft) with HungAfter to answer, shared by every attempt waiting on
// that endpoint. If the probe gets no reply the attempt is abandoned as
// if it had timed out (errEndpointHung: it may have reached the cell, so
// only a call that may be resent, a read or a write under a session
// request id, is watched) and the next attempt names the endpoint
// unreachable. A replica that is merely slow (a long commit, a request
// held for an election) answers the probe and the attempt goes on.

// DefaultHungAfter is Config.HungAfter's default: a hung endpoint is
// found 1.5 s after the request was sent, inside the 1–2 s an election
// takes.
const DefaultHungAfter = 750 * time.Millisecond

// maxWatchedAttempt: an attempt allowed longer than this (an
// administrative call: a backup, a prefix operation) is not watched: it
// is not waited on by a service, and an abandoned one would hold its
// connection for its whole timeout.
const maxWatchedAttempt = 15 * time.Second

// maxLivenessEndpoints bounds the endpoints the client tracks; past it a
// new endpoint takes the place of one with no probe in flight.
const maxLivenessEndpoints = 4096

// errEndpointHung abandons an attempt whose endpoint answered nothing,
// not even a health probe, while it waited.
var errEndpointHung = errors.New("the endpoint answered nothing, not even a health probe, while the request waited (hung or unreachable)")

// liveness is what the client knows of each endpoint's life: when it
// last read anything from it, and the probe in flight. Shared by the
// client's transports.
type liveness struct {
	after time.Duration // HungAfter; 0: watch nothing
	base  time.Time     // the monotonic origin of heard
	// probe sends one health probe to addr, bounded by budget, and
	// reports whether the endpoint may live (a reply came, or the probe
	// could not be sent for reasons of its own).
	probe func(addr string, budget time.Duration) bool

	mu  sync.Mutex
	eps map[string]*endpointLife
}

// endpointLife is one endpoint's entry in liveness.
type endpointLife struct {
	lv    *liveness
	addr  string
	heard atomic.Int64 // nanoseconds since lv.base of the last read from it
	// dialing counts the attempts' connections to it being opened (the
	// probes' aside); dialNS is how long its last connection took to open
	// (TLS handshake included): a probe is given that on top.
	dialing atomic.Int32
	dialNS  atomic.Int64

	mu      sync.Mutex
	probing chan struct{} // closed when the probe in flight ends; nil: none
	alive   bool          // the last probe's answer
}

func newLiveness(after time.Duration, probe func(addr string, budget time.Duration) bool) *liveness {
	return &liveness{after: after, base: time.Now(), probe: probe, eps: map[string]*endpointLife{}}
}

func (lv *liveness) now() int64 { return int64(time.Since(lv.base)) }

// endpoint is addr's entry, made on first use; nil when the table is full
// or lv is nil (nothing watched).
func (lv *liveness) endpoint(addr string) *endpointLife {
	if lv == nil || lv.after <= 0 {
		return nil
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	ep := lv.eps[addr]
	if ep == nil {
		if len(lv.eps) >= maxLivenessEndpoints && !lv.evictLocked() {
			return nil
		}
		ep = &endpointLife{lv: lv, addr: addr}
		lv.eps[addr] = ep
	}
	return ep
}

// evictLocked drops one entry with no probe in flight (the map's order:
// any), to make room for a new endpoint (a proxy whose lockds moved to
// new addresses over its life). Connections still holding the dropped
// entry go on updating it; the endpoint's next one gets a fresh entry.
func (lv *liveness) evictLocked() bool {
	for addr, ep := range lv.eps {
		ep.mu.Lock()
		idle := ep.probing == nil
		ep.mu.Unlock()
		if idle {
			delete(lv.eps, addr)
			return true
		}
	}
	return false
}

// heardNow records that something was read from the endpoint.
func (ep *endpointLife) heardNow() {
	if ep != nil {
		ep.heard.Store(ep.lv.now())
	}
}

// dialStart notes an attempt's connection being opened; the returned
// func notes its end (ok: opened, after d).
func (ep *endpointLife) dialStart() func(ok bool, d time.Duration) {
	if ep == nil {
		return func(bool, time.Duration) {}
	}
	ep.dialing.Add(1)
	return func(ok bool, d time.Duration) {
		ep.dialing.Add(-1)
		if ok {
			ep.dialNS.Store(int64(d))
		}
	}
}

// probeBudget is how long a probe of the endpoint may take: HungAfter,
// plus what its last connection took to open (a TLS handshake over a
// long round trip), as the probe may need a new one.
func (ep *endpointLife) probeBudget() time.Duration {
	if mutant.On(mutant.SDKProbeIgnoresDial) {
		return ep.lv.after
	}
	return ep.lv.after + time.Duration(ep.dialNS.Load())
}

// checkAlive reports whether the endpoint lives: something was read from
// it within HungAfter, a connection to it is still being opened (that
// has its own timeout, and says nothing yet), or it answers a probe (one
// at a time per endpoint: a caller arriving while one is in flight
// shares its answer).
func (ep *endpointLife) checkAlive() bool {
	if ep.lv.now()-ep.heard.Load() < int64(ep.lv.after) {
		return true
	}
	if ep.dialing.Load() > 0 && !mutant.On(mutant.SDKProbeIgnoresDial) {
		return true
	}
	ep.mu.Lock()
	if wait := ep.probing; wait != nil {
		ep.mu.Unlock()
		<-wait
		ep.mu.Lock()
		defer ep.mu.Unlock()
		return ep.alive
	}
	done := make(chan struct{})
	ep.probing = done
	ep.mu.Unlock()
	alive := ep.lv.probe(ep.addr, ep.probeBudget())
	if alive {
		ep.heardNow()
	}
	ep.mu.Lock()
	ep.alive, ep.probing = alive, nil
	ep.mu.Unlock()
	close(done)
	return alive
}

// hungWatch watches one attempt: hung is closed when its endpoint is
// found hung; stop ends the watch.
type hungWatch struct {
	ep      *endpointLife
	hung    chan struct{}
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// watch starts watching an attempt to addr bounded by timeout; nil when
// it is not watched (a timeout too short for a probe to end it sooner,
// no entry for addr).
func (lv *liveness) watch(addr string, timeout time.Duration) *hungWatch {
	if lv == nil || lv.after <= 0 || timeout <= 2*lv.after || timeout > maxWatchedAttempt {
		return nil
	}
	ep := lv.endpoint(addr)
	if ep == nil {
		return nil
	}
	w := &hungWatch{ep: ep, hung: make(chan struct{})}
	w.mu.Lock() // check reads timer
	w.timer = time.AfterFunc(lv.after, w.check)
	w.mu.Unlock()
	return w
}

// check runs when the attempt has waited HungAfter more: it ends the
// watch with hung if the endpoint does not live, else looks again after
// HungAfter.
func (w *hungWatch) check() {
	alive := w.ep.checkAlive()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.stopped:
	case alive:
		w.timer.Reset(w.ep.lv.after)
	default:
		close(w.hung)
		w.stopped = true
	}
}

// C is closed when the endpoint is found hung (a nil watch never is).
func (w *hungWatch) C() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.hung
}

// stop ends the watch; a probe in flight finishes on its own.
func (w *hungWatch) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	w.mu.Unlock()
}

// probeHealth is liveness's probe: one GET /healthz to addr on the
// client's probe transport (connections of its own that never queue: a
// full pool of attempts on a busy replica must not starve its probe),
// bounded by budget. Any reply says the process runs; so does a probe
// that could not be sent for the client's own reasons (no free probe
// connection, the client closing): only silence condemns.
func (c *Client) probeHealth(addr string, budget time.Duration) bool {
	if mutant.On(mutant.SDKHungProbeBlind) {
		return false
	}
	t := c.probe
	if mutant.On(mutant.SDKProbeSharedPool) {
		t = c.bulk
	}
	ctx := c.ctx
	if mutant.On(mutant.SDKProbeOutlivesClose) {
		ctx = context.Background()
	}
	_, _, _, err := t.roundTrip(ctx, exchange{method: http.MethodGet, addr: addr, path: api.RouteHealth, timeout: budget})
	return err == nil || errors.Is(err, fasthttp.ErrNoFreeConns) || c.ctx.Err() != nil
}
