package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/valyala/fasthttp"
)

// call describes one logical request to a cell for the retry loop.
type call struct {
	method string // "POST" unless set
	route  string
	req    any // marshalled afresh for every attempt (after before runs)
	resp   any // decoded from a 2xx reply; may be nil

	keepAlive  bool          // use the KeepAlive connection pool
	timeout    time.Duration // attempt timeout; 0 → Config.RequestTimeout
	anyReplica bool          // any replica answers (directory); do not learn a leader from it

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
	// noClusterAfter: give up with ErrNoCluster once every endpoint has
	// refused connections for this long (0: never).
	noClusterAfter time.Duration
	// auth overrides the client's own Authorization header (a proxy
	// passes on its client's, and only its client's).
	auth authHeader

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

// outcome is what one attempt of a call came to, as decide sees it.
type outcome struct {
	status    int      // HTTP status of the reply; 0 when there was none
	code      api.Code // error code of a non-2xx reply
	hint      string   // leader named by a not_leader reply
	addr      string   // the endpoint tried
	transport bool     // the exchange failed without a reply
	notSent   bool     // ... and the request certainly never left (dial failure, no free connection)
	ctxDone   bool     // the call's context ended (during a failed exchange)
	closed    bool     // the client (or its transport) is closing
	// noCluster: every endpoint has refused connections for the call's
	// noClusterAfter (nothing listens there).
	noCluster bool

	unreachable []string // the endpoints the call failed to reach (call.unreachable)
	retryUnsure bool     // the call may be resent after an unsure failure
	redirects   int      // not_leader hints followed without backoff so far, not counting this one
	unavailable int      // consecutive unavailable replies from addr, this one included
}

// action is what the retry loop does after an attempt.
type action uint8

const (
	actDone      action = iota // 2xx: decode the reply and return
	actFail                    // return the reply's error: a definite answer, or not retryable
	actUnknown                 // return outcome-unknown: the call may have applied and may not be resent
	actRefresh                 // wrong_cell or moved: reload the directory, then return the error
	actCanceled                // the context ended: give up
	actClosed                  // the client is closing: ErrClosed
	actNoCluster               // nothing listens at any endpoint: ErrNoCluster
	actRetry                   // send again at once (to the hinted leader)
	actBackoff                 // wait a jittered backoff, then send again
)

// decision is decide's verdict: the action, plus what the loop first
// records about the endpoint.
type decision struct {
	act    action
	forget bool // forget addr as leader and rotate the next pick past it
	follow bool // record the not_leader hint as the cell's leader
}

// retryable are the only codes a call is resent after. Every other code —
// including ones this SDK does not know — is a final answer.
var retryable = map[api.Code]bool{api.CodeNotLeader: true, api.CodeUnavailable: true}

// decide is the retry policy: pure, a function of one attempt's outcome.
func decide(o outcome) decision {
	switch {
	case o.transport && o.ctxDone:
		return decision{act: actCanceled}
	case o.transport && o.closed:
		return decision{act: actClosed}
	case o.transport && o.notSent && o.noCluster:
		return decision{act: actNoCluster}
	case o.transport && !o.notSent && !o.retryUnsure:
		return decision{act: actUnknown, forget: true}
	case o.transport:
		return decision{act: actBackoff, forget: true}
	case o.status >= 200 && o.status < 300:
		return decision{act: actDone}
	case o.code == api.CodeWrongCell, o.code == api.CodeMoved:
		return decision{act: actRefresh}
	case !retryable[o.code]:
		return decision{act: actFail}
	case o.code == api.CodeNotLeader: // never applied: always safe to resend
		// A hint naming the replica this call just failed to reach is a
		// dead leader others have not yet replaced: back off instead.
		fresh := o.hint != "" && o.hint != o.addr && !slices.Contains(o.unreachable, o.hint)
		switch {
		case !fresh:
			return decision{act: actBackoff, forget: true}
		case o.redirects < maxFreeRedirects:
			return decision{act: actRetry, follow: true}
		default:
			return decision{act: actBackoff, follow: true}
		}
	default: // unavailable
		switch {
		case !o.retryUnsure:
			return decision{act: actUnknown}
		case o.unavailable >= unavailableRotate:
			return decision{act: actBackoff, forget: true}
		default:
			return decision{act: actBackoff}
		}
	}
}

// attempt is one HTTP exchange of cl with addr: err is the transport's
// error, encErr a request that cannot be encoded (nothing was sent).
func (c *Client) attempt(ctx context.Context, cl *call, method, addr string, timeout time.Duration) (status int, body []byte, sent time.Time, err, encErr error) {
	if cl.before != nil {
		cl.before()
	}
	var reqBody []byte
	if cl.req != nil {
		b, err := json.Marshal(cl.req)
		if err != nil {
			return 0, nil, time.Time{}, nil, api.Errorf(api.CodeBadRequest, "encode %s: %v", cl.route, err)
		}
		reqBody = b
	}
	tr := c.bulk
	if cl.keepAlive {
		tr = c.ka
	}
	cl.attempts++
	status, body, sent, err = tr.roundTrip(ctx, exchange{method: method, addr: addr, path: cl.route, body: reqBody, timeout: timeout,
		waitLeader: true, unreachable: cl.unreachable, cell: cl.cell, auth: cl.auth})
	return status, body, sent, err, nil
}

// do is the SDK's one retry loop. It sends cl to cs — the last known
// leader, else the next replica in rotation — and acts on each attempt's
// outcome as decide says: follow not_leader hints, rotate and back off on
// transport errors and unavailable (resending only when the call allows
// it or the request never left), return every other code at once.
//
// Errors are *api.Error (or wrap one); ErrClosed once the client closes. A
// write (cl.write) that fails after an attempt may have reached the cell
// fails with an outcome-unknown error (ErrOutcomeUnknown).
func (c *Client) do(ctx context.Context, cs *cellState, cl *call) error {
	method := cl.method
	if method == "" {
		method = http.MethodPost
	}
	timeout := cl.timeout
	if timeout <= 0 {
		timeout = c.timeout
	}
	if cs != c.seeds && cs.name != "directory" {
		cl.cell = cs.name
	}
	var closing <-chan struct{}
	if !cl.duringClose {
		closing = c.ctx.Done()
	}
	var (
		last      *api.Error
		redirects int
		lastAddr  string
		unavail   int // consecutive unavailable replies from lastAddr
		retries   int
		// refused are the endpoints that refused connections since
		// refusedSince, with nothing else heard in between.
		refused      []string
		refusedSince time.Time
	)
	giveUp := func(err error) error {
		if c.closed.Load() && !cl.duringClose {
			return ErrClosed
		}
		where := fmt.Sprintf("on cell %q", cs.name)
		if cs.name == "" {
			where = "from any endpoint"
		}
		msg := fmt.Sprintf("%s %s: gave up after %d attempts: %v", cl.route, where, cl.attempts, err)
		if last != nil {
			msg += " (last error: " + last.Error() + ")"
		}
		if cl.write && cl.reached {
			return outcomeUnknown(err, "%s", msg)
		}
		return &gaveUpError{apiErr: &api.Error{Code: api.CodeUnavailable, Message: msg}, ctxErr: err}
	}
	wait := func() error {
		t := time.NewTimer(backoff(retries))
		retries++
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return giveUp(ctx.Err())
		case <-closing:
			return ErrClosed
		}
	}

	for {
		if err := ctx.Err(); err != nil {
			return giveUp(err)
		}
		if closing != nil && c.closed.Load() {
			return ErrClosed
		}
		addr := cs.pick()
		if addr == "" {
			return api.Errorf(api.CodeUnavailable, "cell %q has no endpoints", cs.name)
		}
		status, rbody, sent, err, encErr := c.attempt(ctx, cl, method, addr, timeout)
		if encErr != nil {
			return encErr
		}
		if cl.firstSent.IsZero() {
			cl.firstSent = sent
		}
		var aerr *api.Error

		o := outcome{addr: addr, unreachable: cl.unreachable, retryUnsure: cl.retryUnsure, redirects: redirects, ctxDone: ctx.Err() != nil}
		if err != nil {
			var de *dialError
			o.transport = true
			o.notSent = errors.As(err, &de) || errors.Is(err, fasthttp.ErrNoFreeConns)
			o.closed = errors.Is(err, errTransportClosed) || (closing != nil && c.closed.Load())
			if !o.notSent {
				cl.reached = true
			}
			if errors.As(err, &de) && errors.Is(err, syscall.ECONNREFUSED) {
				if len(refused) == 0 {
					refusedSince = time.Now()
				}
				if !slices.Contains(refused, addr) {
					refused = append(refused, addr)
				}
				o.noCluster = cl.noClusterAfter > 0 && len(refused) >= len(cs.endpointList()) && time.Since(refusedSince) >= cl.noClusterAfter
			} else {
				refused = refused[:0]
			}
			if !slices.Contains(cl.unreachable, addr) && len(cl.unreachable) < maxUnreachable {
				cl.unreachable = append(cl.unreachable, addr)
			}
			last = api.Errorf(api.CodeUnavailable, "%s %s: %v", addr, cl.route, err)
		} else {
			refused = refused[:0]
			if i := slices.Index(cl.unreachable, addr); i >= 0 {
				cl.unreachable = slices.Delete(cl.unreachable, i, i+1) // it answers again
			}
			o.status = status
			if status < 200 || status >= 300 {
				aerr = decodeError(status, rbody, addr)
				last = aerr
				o.code, o.hint = aerr.Code, aerr.Leader
				if aerr.Code == api.CodeUnavailable {
					cl.reached = true
					if addr == lastAddr {
						unavail++
					} else {
						unavail = 1
					}
					o.unavailable = unavail
				}
			}
		}

		d := decide(o)
		if d.follow {
			cs.redirect(addr, o.hint)
		}
		if d.forget {
			cs.failed(addr)
		}
		if o.code == api.CodeNotLeader {
			unavail = 0
		}
		if o.unavailable >= unavailableRotate && d.forget {
			unavail = 0
		}
		if !o.transport {
			lastAddr = addr
		}
		switch d.act {
		case actDone:
			if cl.resp != nil && len(rbody) > 0 {
				if err := json.Unmarshal(rbody, cl.resp); err != nil {
					return api.Errorf(api.CodeInternal, "decode %s reply from %s: %v", cl.route, addr, err)
				}
			}
			if !cl.anyReplica {
				cs.answered(addr)
			}
			cl.sent = sent
			return nil
		case actCanceled:
			return giveUp(ctx.Err())
		case actClosed:
			return ErrClosed
		case actNoCluster:
			return &noClusterError{apiErr: api.Errorf(api.CodeUnavailable,
				"no lockd listens at %s: every endpoint refused the connection for %v (is a cluster running? make run starts a local one; or give its addresses with --endpoints)",
				strings.Join(refused, ", "), time.Since(refusedSince).Round(100*time.Millisecond))}
		case actUnknown:
			if cl.write {
				return outcomeUnknown(nil, "%s", last.Message)
			}
			if o.transport {
				last.Message += "; the outcome is unknown"
			}
			return last
		case actRefresh:
			// The directory is stale (a prefix moved): reload it so the
			// caller's retry is routed right.
			if cs != c.seeds {
				rctx, cancel := context.WithTimeout(ctx, timeout)
				if err := c.RefreshDirectory(rctx); err != nil {
					c.log.Warn("directory refresh after wrong_cell failed", "err", err)
				}
				cancel()
			}
			if cl.write && cl.reached {
				// This refusal applied nothing, but an earlier attempt
				// may have (a lockd that no longer hosts the cell, or a
				// sealed prefix, refuses without looking): sending the
				// write on to another cell could apply it twice.
				return outcomeUnknown(aerr, "%s", aerr.Message)
			}
			return aerr
		case actFail:
			return aerr
		case actRetry:
			redirects++
		case actBackoff:
			if o.transport {
				c.log.Debug("lockd request failed, retrying", "cell", cs.name, "endpoint", addr, "route", cl.route, "err", err)
			}
			if err := wait(); err != nil {
				return err
			}
		}
	}
}

// decodeError turns a non-2xx reply into an *api.Error, synthesising one
// when the body is not an api.ErrorResponse (a proxy or router answered).
func decodeError(status int, body []byte, addr string) *api.Error {
	var er api.ErrorResponse
	if err := json.Unmarshal(body, &er); err == nil && er.Error != nil && er.Error.Code != "" {
		return er.Error
	}
	snippet := string(body)
	if len(snippet) > 200 {
		snippet = snippet[:200]
	}
	code := api.CodeInternal
	switch status {
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		code = api.CodeUnavailable
	case http.StatusUnauthorized, http.StatusForbidden:
		code = api.CodeUnauthorized
	}
	return api.Errorf(code, "HTTP %d from %s: %q", status, addr, snippet)
}
