package sdk

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// call describes one logical request to a cell for the retry loop.
type call struct {
	method string // "POST" unless set
	route  string
	req    any // marshalled afresh for every attempt (after before runs)
	resp   any // decoded from a 2xx reply; may be nil

	keepAlive bool          // use the KeepAlive connection pool
	timeout   time.Duration // attempt timeout; 0 → Config.RequestTimeout
	// retryTimeout is the timeout of the first attempt after the first
	// (0: timeout), doubled for each later one up to timeout: a
	// KeepAlive's first attempt may be a long poll, those after it ask
	// for an immediate reply, and one sent to a hung replica must not
	// take a long poll's time from the lease; doubling reaches a live
	// replica that answers, or a connection that opens, slower than the
	// first retry's timeout.
	retryTimeout time.Duration
	anyReplica   bool // any replica answers (directory); do not learn a leader from it

	// retryUnsure lets the loop resend after failures whose outcome is
	// unknown (unavailable, a connection lost after sending). True for reads
	// and for writes deduplicated by a session request id.
	retryUnsure bool
	// write marks a call that changes state: when it fails after an
	// attempt may have reached the cell, its error is outcome-unknown
	// (ErrOutcomeUnknown).
	write bool
	// duringClose lets the call run while the client is closing (the
	// session close requests Close itself sends).
	duringClose bool
	// before runs before every attempt (to refresh a write's ack).
	before func()
	// unreachable are the endpoints this call failed to reach and that
	// have not answered since: a replica that still names one of them as
	// leader holds the next attempt until it learns of another
	// (api.HeaderUnreachable). A set, not the last one: with the leader
	// and a follower both dead, the last failure is often the follower,
	// and replicas naming the dead leader would send the call back to it
	// at once, through backoffs that grow past the election.
	unreachable []string
	// cell is the cell the call is routed to (api.HeaderCell); "" for
	// directory calls.
	cell string
	// dirIndex is a floor for the directory index sent with the call
	// (api.HeaderDirectoryIndex): a lockproxy's client's, which may be
	// newer than the proxy's own view.
	dirIndex uint64
	// noClusterAfter: give up with ErrNoCluster once every endpoint has
	// refused connections for this long (0: never).
	noClusterAfter time.Duration
	// auth overrides the client's own Authorization header (a proxy
	// passes on its client's, and only its client's).
	auth authHeader
	// json: send req in JSON, not its binary encoding (an endpoint
	// refused that; wire.go).
	json bool

	// Set by do.
	sent time.Time // when the successful attempt was sent
	// firstSent is when the first attempt was sent: a deduplicated retry
	// is answered with what the first one applied (a session open's
	// lease began then).
	firstSent time.Time
	attempts  int
	// reached: some attempt may have reached the cell without a definite
	// answer (lost after sending, or answered unavailable), so it may have
	// been applied.
	reached bool
}

const (
	backoffBase = 20 * time.Millisecond
	backoffMax  = 1 * time.Second
	// maxFreeRedirects is how many not_leader redirects with a fresh hint
	// a call follows at once before backing off between them.
	maxFreeRedirects = 3
	// maxStaleResends is how many times a call is resent at once, to the
	// same endpoint, after finding its pooled connection closed by the
	// server (errStaleConn: each such connection is dropped, so a pool a
	// restarted lockd left full of them drains); past it, it backs off
	// and rotates as after any transport failure.
	maxStaleResends = 8
	// unavailableRotate is how many consecutive unavailable replies from
	// one replica make the loop look at another: a leader that keeps
	// answering unavailable may have lost its quorum to a new leader.
	unavailableRotate = 2
	// maxUnreachable bounds call.unreachable (and the header carrying it):
	// more dead endpoints than a cell has replicas means something else.
	maxUnreachable = 8
)

// backoff is a full-jitter exponential delay for the n-th retry (n ≥ 0),
// in [d/2, d] with d = min(backoffMax, backoffBase·2ⁿ).
func backoff(n int) time.Duration {
	d := backoffMax
	if n < 10 {
		d = min(backoffMax, backoffBase<<n)
	}
	return d/2 + rand.N(d/2+1)
}

// retryLoop is one call's retry loop: the call, the cell it goes to, how
// it is sent, and what the loop remembers between attempts.
type retryLoop struct {
	c       *Client
	cs      *cellState
	cl      *call
	method  string
	timeout time.Duration   // of one attempt
	closing <-chan struct{} // the client's end; nil when the call runs during Close
	st      retryState
	trace   *Trace // the call's trace (WithTrace), nil if none
}

// newRetryLoop prepares cl's retry loop on cs.
func (c *Client) newRetryLoop(cs *cellState, cl *call) *retryLoop {
	l := &retryLoop{c: c, cs: cs, cl: cl, method: cl.method, timeout: cl.timeout}
	if l.method == "" {
		l.method = http.MethodPost
	}
	if l.timeout <= 0 {
		l.timeout = c.timeout
	}
	if cs != c.seeds && cs.name != "directory" {
		cl.cell = cs.name
	}
	if !cl.duringClose {
		l.closing = c.ctx.Done()
	}
	return l
}

// do is the SDK's one retry loop. It sends cl to cs — the last known
// leader, else the next replica in rotation — and, attempt by attempt,
// observes the result, decides (decide: pure) and acts: follow not_leader
// hints, rotate and back off on transport errors and unavailable
// (resending only when the call allows it or the request never left),
// reload the directory on wrong_cell and moved, return every other code
// at once.
//
// Errors are *api.Error (or wrap one); ErrClosed once the client closes. A
// write (cl.write) that fails after an attempt may have reached the cell
// fails with an outcome-unknown error (ErrOutcomeUnknown).
func (c *Client) do(ctx context.Context, cs *cellState, cl *call) error {
	l := c.newRetryLoop(cs, cl)
	l.trace = traceOf(ctx)
	l.trace.begin()
	for {
		addr, err := l.next(ctx)
		if err != nil {
			return err
		}
		r, err := l.attempt(ctx, addr)
		if err != nil {
			return err // the request cannot be encoded: nothing was sent
		}
		if l.c.fellBack(cl, r) {
			l.trace.tried(r, outcome{})
			continue // resent at once in JSON
		}
		o := l.st.observe(cl, r)
		l.trace.tried(r, o)
		d := decide(o)
		l.st.settle(o, d)
		if done, err := l.act(ctx, o, d, r); done {
			return err
		}
	}
}

// next is the endpoint the next attempt goes to, or why there is none.
func (l *retryLoop) next(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", l.giveUp(err)
	}
	if l.closingNow() {
		return "", ErrClosed
	}
	addr := l.cs.pick()
	if addr == "" {
		return "", api.Errorf(api.CodeUnavailable, "cell %q has no endpoints", l.cs.name)
	}
	return addr, nil
}

// retryAttemptTimeout is the timeout of attempt n (n ≥ 1: the first
// retry) of a call whose retries start at first and double up to full.
func retryAttemptTimeout(first, full time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < full; i++ {
		d *= 2
	}
	return min(d, full)
}

// closingNow reports whether the client closes and the call may not run
// then.
func (l *retryLoop) closingNow() bool { return l.closing != nil && l.c.closed.Load() }

// attempt is one HTTP exchange of the call with addr. Its error is a
// request that cannot be encoded (nothing was sent); the exchange's own
// error is in the result.
func (l *retryLoop) attempt(ctx context.Context, addr string) (attemptResult, error) {
	cl := l.cl
	if cl.before != nil {
		cl.before()
	}
	encStart := l.trace.now()
	reqBody, ctype, err := l.c.encodeRequest(cl, addr)
	if err != nil {
		return attemptResult{}, api.Errorf(api.CodeBadRequest, "encode %s: %v", cl.route, err)
	}
	l.trace.encoded(encStart)
	tr := l.c.bulk
	if cl.keepAlive {
		tr = l.c.ka
	}
	timeout := l.timeout
	if cl.attempts > 0 && cl.retryTimeout > 0 && !mutant.On(mutant.KARetryLongTimeout) {
		timeout = retryAttemptTimeout(cl.retryTimeout, l.timeout, cl.attempts)
	}
	cl.attempts++
	if cl.route == api.RouteSessionKeepAlive {
		l.c.keepAlivesSent.Add(1)
	}
	r := attemptResult{addr: addr, wire: ctype == api.ContentTypeWire}
	r.status, r.body, r.sent, r.err = tr.roundTrip(ctx, exchange{method: l.method, addr: addr, path: cl.route, body: reqBody, contentType: ctype, timeout: timeout,
		waitLeader: true, unreachable: cl.unreachable, cell: cl.cell, dirIndex: l.c.routedBy(cl), auth: cl.auth, trace: l.trace,
		watchHung: cl.retryUnsure && !cl.keepAlive, resendable: (cl.retryUnsure || mutant.On(mutant.SDKResendableAll)) && !cl.keepAlive && l.cs.isProxied()})
	r.took, r.timeout = time.Since(r.sent), timeout
	if cl.firstSent.IsZero() {
		cl.firstSent = r.sent
	}
	r.ctxDone = ctx.Err() != nil
	if r.err != nil {
		r.closing = l.closingNow()
		r.endpoints = len(l.cs.endpointList())
		r.now = time.Now()
	}
	return r, nil
}
