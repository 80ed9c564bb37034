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
// no Raft) with HungAfter to answer, plus what a connection there takes
// to open, shared by every attempt waiting on that endpoint. If the probe gets no reply the attempt is abandoned as
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

// maxDialAllowance bounds what a probe is given for opening its
// connection; past it the attempt's timeout (5 s) ends first anyway.
const maxDialAllowance = DefaultRequestTimeout

// maxLivenessEndpoints bounds the endpoints the client tracks; past it a
// new endpoint takes the place of the idlest (evictLocked).
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
	// probes' aside); dialNS is one more than the estimate (noteDial), in
	// nanoseconds, of what its connections take to open, TLS handshake
	// included (0: none opened yet): a probe is given that on top.
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

// evictLocked drops the entry heard from longest ago with no probe and
// no dial in flight, to make room for a new endpoint (a proxy whose
// lockds moved to new addresses over its life): one idle, so that its
// connections, which keep the entry they were opened with, are likely
// gone. Its next connection gets a fresh entry.
func (lv *liveness) evictLocked() bool {
	var oldest *endpointLife
	for _, ep := range lv.eps {
		ep.mu.Lock()
		idle := ep.probing == nil && ep.dialing.Load() == 0
		ep.mu.Unlock()
		if idle && (oldest == nil || ep.heard.Load() < oldest.heard.Load()) {
			oldest = ep
		}
	}
	if oldest == nil {
		return false
	}
	delete(lv.eps, oldest.addr)
	return true
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
			ep.noteDial(d)
		}
	}
}

// noteDial folds one opened connection's time into the endpoint's
// estimate: a moving average (a quarter of each new sample), so one slow
// dial (a lost SYN) moves it a quarter of the way, and an endpoint that
// is far away (every dial slow) is estimated as far.
func (ep *endpointLife) noteDial(d time.Duration) {
	for {
		old := ep.dialNS.Load()
		est := int64(d)
		if old > 0 {
			est = (old - 1) + (int64(d)-(old-1))/4
		}
		if ep.dialNS.CompareAndSwap(old, est+1) { // 0 stays "none yet"
			return
		}
	}
}

// dialAllowance is what a connection to the endpoint takes to open, by
// the estimate, at most maxDialAllowance: a probe may need a connection
// of its own and is given that on top of HungAfter.
func (ep *endpointLife) dialAllowance() time.Duration {
	if mutant.On(mutant.SDKProbeIgnoresDial) {
		return 0
	}
	return min(time.Duration(max(ep.dialNS.Load()-1, 0)), maxDialAllowance)
}

// firstDialPending reports whether a connection to the endpoint is being
// opened and none has opened yet: the attempt watched may be waiting for
// it with nothing sent, and how long a connection there takes is not
// known, so a probe cannot be given its time. Once one has opened, its
// time is the allowance and a pending dial defers nothing: under a hung
// TLS server or a dead machine every new attempt's dial hangs, and they
// would hide the hang.
func (ep *endpointLife) firstDialPending() bool {
	return ep.dialing.Load() > 0 && ep.dialNS.Load() == 0 && !mutant.On(mutant.SDKProbeIgnoresDial)
}

// checkAlive reports whether the endpoint lives: something was read from
// it within HungAfter, its first connection is still being opened and
// mayDefer (a watch defers once), or it answers a probe (one at a time per endpoint: a caller
// arriving while one is in flight shares its answer). deferred says the
// answer came from the pending dial.
func (ep *endpointLife) checkAlive(mayDefer bool) (alive, deferred bool) {
	if ep.lv.now()-ep.heard.Load() < int64(ep.lv.after) {
		return true, false
	}
	if mayDefer && ep.firstDialPending() {
		return true, true
	}
	ep.mu.Lock()
	if wait := ep.probing; wait != nil {
		ep.mu.Unlock()
		<-wait
		ep.mu.Lock()
		defer ep.mu.Unlock()
		return ep.alive, false
	}
	done := make(chan struct{})
	ep.probing = done
	ep.mu.Unlock()
	// The probe opens a connection of its own: its budget allows for it.
	alive = ep.lv.probe(ep.addr, ep.lv.after+ep.dialAllowance())
	if alive {
		ep.heardNow()
	}
	ep.mu.Lock()
	ep.alive, ep.probing = alive, nil
	ep.mu.Unlock()
	close(done)
	return alive, false
}

// hungWatch watches one attempt: hung is closed when its endpoint is
// found hung; stop ends the watch.
type hungWatch struct {
	ep      *endpointLife
	hung    chan struct{}
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	// deferred: the watch has once waited for a pending dial.
	deferred bool
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
	w.mu.Lock()
	mayDefer := !w.deferred
	w.mu.Unlock()
	alive, deferred := w.ep.checkAlive(mayDefer)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deferred = w.deferred || deferred
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
// full pool of attempts on a busy replica must not starve its probe; each
// opened for the probe and closed after it, so a connection the server
// closed while idle, a lockd restarted since, never fails one), bounded
// by budget. Any reply says the process runs; so does a probe
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
