package sdk

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/valyala/fasthttp"
)

// attemptResult is what one attempt of a call came back with, as the
// network gave it: a reply (status and body) or a transport error.
type attemptResult struct {
	addr   string    // the endpoint tried
	status int       // the reply's HTTP status; 0 without a reply
	body   []byte    // the reply's body
	sent   time.Time // when the request was sent
	err    error     // the transport's error: the exchange failed without a reply
	wire   bool      // the request went in the binary encoding (wire.go)
	// took and timeout: how long the exchange took, of the timeout it had
	// (0: not known).
	took, timeout time.Duration

	ctxDone bool // the call's context had ended when the attempt returned
	// Read only after a transport error:
	closing   bool      // the client is closing and the call may not run then
	endpoints int       // how many endpoints the cell has
	now       time.Time // when the attempt returned (the no-cluster clock)
}

// retryState is what one call's retry loop remembers between attempts.
// observe and settle change it; the loop's wait counts its backoffs.
type retryState struct {
	redirects int    // not_leader hints followed without backoff
	stale     int    // resends at once after a stale pooled connection
	retries   int    // backoffs waited: the next backoff's exponent
	lastAddr  string // the endpoint of the last reply (transport failures aside)
	unavail   int    // consecutive unavailable replies from lastAddr
	// notApplied: consecutive not_applied unavailable replies from lastAddr.
	notApplied int
	// refused are the endpoints that refused connections since
	// refusedSince, with nothing else heard in between.
	refused      []string
	refusedSince time.Time
	last         *api.Error // the last failed attempt's error
}

// observe turns one attempt's result into the outcome decide reads. It
// records what the attempt says in st and in cl (the endpoints the call
// failed to reach; whether an attempt may have reached the cell) and does
// nothing else: no I/O, no clock.
func (st *retryState) observe(cl *call, r attemptResult) outcome {
	o := outcome{addr: r.addr, retryUnsure: cl.retryUnsure, redirects: st.redirects, staleResends: st.stale, ctxDone: r.ctxDone}
	if r.err != nil {
		st.observeTransport(cl, r, &o)
	} else {
		st.observeReply(cl, r, &o)
	}
	// After this attempt: a replica that answered is reachable again.
	o.unreachable = cl.unreachable
	return o
}

// observeTransport is observe of an exchange that failed without a reply.
func (st *retryState) observeTransport(cl *call, r attemptResult, o *outcome) {
	var de *dialError
	dial := errors.As(r.err, &de)
	o.transport = true
	o.stale = errors.Is(r.err, errStaleConn)
	o.notSent = dial || o.stale || errors.Is(r.err, fasthttp.ErrNoFreeConns)
	o.closed = errors.Is(r.err, errTransportClosed) || r.closing
	if !o.notSent {
		cl.reached = true
	}
	if dial && errors.Is(r.err, syscall.ECONNREFUSED) {
		if len(st.refused) == 0 {
			st.refusedSince = r.now
		}
		if !slices.Contains(st.refused, r.addr) {
			st.refused = append(st.refused, r.addr)
		}
		o.noCluster = cl.noClusterAfter > 0 && len(st.refused) >= r.endpoints && r.now.Sub(st.refusedSince) >= cl.noClusterAfter
	} else {
		st.refused = st.refused[:0]
	}
	// A stale pooled connection says the endpoint is reachable: only that
	// connection to it was gone.
	if !o.stale && !slices.Contains(cl.unreachable, r.addr) && len(cl.unreachable) < maxUnreachable {
		cl.unreachable = append(cl.unreachable, r.addr)
	}
	st.last = api.Errorf(api.CodeUnavailable, "%s %s: %v", r.addr, cl.route, r.err)
}

// observeReply is observe of an exchange that got a reply.
func (st *retryState) observeReply(cl *call, r attemptResult, o *outcome) {
	st.refused = st.refused[:0]
	if i := slices.Index(cl.unreachable, r.addr); i >= 0 {
		cl.unreachable = slices.Delete(cl.unreachable, i, i+1) // it answers again
	}
	o.status = r.status
	if r.status >= 200 && r.status < 300 {
		return
	}
	aerr := decodeError(r.status, r.body, r.addr)
	st.last = aerr
	o.code, o.hint = aerr.Code, aerr.Leader
	if aerr.Code == api.CodeNotLeader && aerr.Elected {
		o.elected = true
		if i := slices.Index(cl.unreachable, aerr.Leader); i >= 0 {
			cl.unreachable = slices.Delete(cl.unreachable, i, i+1) // a new process may answer there
		}
	}
	if aerr.Code != api.CodeUnavailable {
		return
	}
	o.notApplied = aerr.NotApplied
	if r.addr != st.lastAddr {
		st.unavail, st.notApplied = 0, 0 // another replica: both runs start again
	}
	if aerr.NotApplied {
		// Refused before it could apply (the state taking a prefix up,
		// an entry Raft dropped, a view behind the client's): stay with
		// this replica, as not_leader would send the call back to it;
		// but not for ever: a lockd or proxy whose directory view lags
		// hosts no replica of the cell and names no leader. The replica's
		// run of unsure answers is kept: an overloaded leader mixing
		// refusals with timeouts is still rotated off.
		st.notApplied++
		o.notAppliedRun = st.notApplied
		return
	}
	cl.reached = true
	st.unavail++
	o.unavailable = st.unavail
	// Held the whole attempt and still not committed: a leader whose Raft
	// or disk froze under a live HTTP layer (its health probe answers)
	// would hold the resend as long.
	o.heldOut = r.timeout > 0 && r.took >= r.timeout*heldOutPercent/100 && !mutant.On(mutant.SDKHeldOutResent)
}

// heldOutPercent: an unavailable reply that came after this share of its
// attempt's timeout says the replica held the request to its end.
const heldOutPercent = 90

// settle records decide's verdict d on outcome o in the loop state: what
// the next attempt's outcome counts from. Pure.
func (st *retryState) settle(o outcome, d decision) {
	if o.code == api.CodeNotLeader || (o.unavailable >= unavailableRotate || o.notAppliedRun >= notAppliedRotate || o.heldOut) && d.forget {
		st.unavail, st.notApplied = 0, 0 // the next replica starts afresh
	}
	if !o.transport {
		st.lastAddr = o.addr
	}
	switch {
	case d.act == actRetry && o.stale:
		st.stale++
	case d.act == actRetry:
		st.redirects++
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
