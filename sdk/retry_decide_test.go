package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/valyala/fasthttp"
)

// retryStep is one turn of do's loop without the network and without
// acting: observe the attempt's result, decide, settle the loop state.
func retryStep(cl *call, st *retryState, r attemptResult) (outcome, decision) {
	o := st.observe(cl, r)
	d := decide(o)
	st.settle(o, d)
	return o, d
}

// retryAfter is what the loop and the call remember after an attempt.
type retryAfter struct {
	redirects, unavail   int
	stale                int
	lastAddr             string
	refused, unreachable []string
	reached              bool
}

// retryCase is one row of the retry loop's decision table: the call, the
// attempts before (each must leave the loop sending again), the attempt
// that counts, what decide makes of it, what the loop remembers after,
// and for a final answer (actFail, actUnknown, actRefresh) the call's
// error.
type retryCase struct {
	name   string
	cl     call
	before []attemptResult
	r      attemptResult
	want   decision
	after  retryAfter
	code   api.Code // the error's code (final answers only)
	// unknown: the error matches ErrOutcomeUnknown; suffix: its message
	// says the outcome is unknown.
	unknown, suffix bool
}

const ra, rb, rc = "a:1", "b:1", "c:1" // the cell's three replicas

var retryT0 = time.Unix(1_000_000, 0)

// Attempt results, as the network gives them.

func rReply(addr string, e api.Error) attemptResult {
	body, _ := json.Marshal(api.ErrorResponse{Error: &e})
	return attemptResult{addr: addr, status: e.Code.HTTPStatus(), body: body}
}
func rRefusal(addr string, code api.Code) attemptResult {
	return rReply(addr, api.Error{Code: code, Message: "refused"})
}
func rNotLeader(addr, hint string) attemptResult {
	return rReply(addr, api.Error{Code: api.CodeNotLeader, Leader: hint})
}
func rUnavail(addr string) attemptResult { return rRefusal(addr, api.CodeUnavailable) }

// rHeldOut is an unavailable reply that came at the end of its attempt:
// the replica held the request its whole timeout.
func rHeldOut(addr string) attemptResult {
	r := rUnavail(addr)
	r.took, r.timeout = 5*time.Second, 5*time.Second
	return r
}

// rNotApplied is an unavailable reply marked not_applied: the cell's state
// refused the request outright.
func rNotApplied(addr string) attemptResult {
	return rReply(addr, api.Error{Code: api.CodeUnavailable, Message: "taking up prefix", NotApplied: true})
}
func rRaw(addr string, status int, body string) attemptResult {
	return attemptResult{addr: addr, status: status, body: []byte(body)}
}
func rOK(addr string) attemptResult {
	return attemptResult{addr: addr, status: 200, body: []byte(`{}`)}
}
func rTransport(addr string, err error, at time.Duration) attemptResult {
	return attemptResult{addr: addr, err: err, endpoints: 3, now: retryT0.Add(at)}
}
func rRefused(addr string, at time.Duration) attemptResult {
	return rTransport(addr, &dialError{syscall.ECONNREFUSED}, at)
}
func rLost(addr string) attemptResult                             { return rTransport(addr, io.ErrUnexpectedEOF, 0) }
func rWith(r attemptResult, f func(*attemptResult)) attemptResult { f(&r); return r }

// The calls the SDK makes, by what the loop may do with them.
var (
	rRead         = call{route: api.RouteGet, retryUnsure: true}
	rWrite        = call{route: api.RoutePut, write: true}                    // no request id: never resent once it may have left
	rSessionWrite = call{route: api.RoutePut, write: true, retryUnsure: true} // deduplicated by its session's request id
	rForward      = call{route: api.RoutePut}                                 // a proxy's client's request, RetryUnsure false
	rDir          = call{method: "GET", route: api.RouteDirectory, anyReplica: true, retryUnsure: true, noClusterAfter: 2 * time.Second}
)

// retryCases is the decision table: one row for each case do handles.
func retryCases() []retryCase {
	s := time.Second
	eight := make([]attemptResult, maxUnreachable)
	var eightAddrs []string
	for i := range eight {
		eight[i] = rLost(fmt.Sprintf("e%d:1", i))
		eightAddrs = append(eightAddrs, eight[i].addr)
	}
	cases := []retryCase{
		// Replies.
		{name: "2xx", cl: rRead, r: rOK(ra), want: decision{act: actDone}, after: retryAfter{lastAddr: ra}},
		{name: "2xx from a replica that was unreachable", cl: rRead, before: []attemptResult{rLost(ra)}, r: rOK(ra),
			want: decision{act: actDone}, after: retryAfter{lastAddr: ra, reached: true}},

		// Transport failures.
		{name: "context ended during the exchange", cl: rRead, r: rWith(rLost(ra), func(r *attemptResult) { r.ctxDone = true }),
			want: decision{act: actCanceled}, after: retryAfter{unreachable: []string{ra}, reached: true}},
		{name: "context ended, and the client closing", cl: rRead, r: rWith(rLost(ra), func(r *attemptResult) { r.ctxDone, r.closing = true, true }),
			want: decision{act: actCanceled}, after: retryAfter{unreachable: []string{ra}, reached: true}},
		{name: "client closing during the exchange", cl: rRead, r: rWith(rLost(ra), func(r *attemptResult) { r.closing = true }),
			want: decision{act: actClosed}, after: retryAfter{unreachable: []string{ra}, reached: true}},
		{name: "transport closed", cl: rWrite, r: rTransport(ra, &dialError{errTransportClosed}, 0),
			want: decision{act: actClosed}, after: retryAfter{unreachable: []string{ra}}},
		{name: "connection refused by one endpoint of three", cl: rDir, r: rRefused(ra, 0),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{refused: []string{ra}, unreachable: []string{ra}}},
		{name: "refused by every endpoint, not yet for noClusterAfter", cl: rDir, before: []attemptResult{rRefused(ra, 0), rRefused(rb, s)}, r: rRefused(rc, 1900*time.Millisecond),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{refused: []string{ra, rb, rc}, unreachable: []string{ra, rb, rc}}},
		{name: "refused by every endpoint for noClusterAfter", cl: rDir, before: []attemptResult{rRefused(ra, 0), rRefused(rb, s)}, r: rRefused(rc, 2*s),
			want: decision{act: actNoCluster}, after: retryAfter{refused: []string{ra, rb, rc}, unreachable: []string{ra, rb, rc}}},
		{name: "an endpoint refusing again counts once", cl: rDir, before: []attemptResult{rRefused(ra, 0), rRefused(rb, s)}, r: rRefused(ra, 3*s),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{refused: []string{ra, rb}, unreachable: []string{ra, rb}}},
		{name: "refused by every endpoint, the call without noClusterAfter", cl: rRead, before: []attemptResult{rRefused(ra, 0), rRefused(rb, 5*s)}, r: rRefused(rc, 10*s),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{refused: []string{ra, rb, rc}, unreachable: []string{ra, rb, rc}}},
		{name: "a reply restarts the refused clock", cl: rDir, before: []attemptResult{rRefused(ra, 0), rUnavail(rb), rRefused(rb, s), rRefused(rc, 2*s)}, r: rRefused(ra, 2500*time.Millisecond),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{unavail: 1, lastAddr: rb, refused: []string{rb, rc, ra}, unreachable: []string{ra, rb, rc}, reached: true}},
		{name: "a lost connection restarts the refused clock", cl: rDir, before: []attemptResult{rRefused(ra, 0), rLost(rb), rRefused(rb, s), rRefused(rc, 2*s)}, r: rRefused(ra, 2500*time.Millisecond),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{refused: []string{rb, rc, ra}, unreachable: []string{ra, rb, rc}, reached: true}},
		{name: "no free connection: never sent, a write too", cl: rWrite, r: rTransport(ra, fasthttp.ErrNoFreeConns, 0),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{unreachable: []string{ra}}},
		{name: "dial failure: never sent, a write too", cl: rWrite, r: rTransport(ra, &dialError{errors.New("no route to host")}, 0),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{unreachable: []string{ra}}},
		{name: "stale pooled connection: never sent, a write too; at once, to the same endpoint", cl: rWrite, r: rTransport(ra, errStaleConn, 0),
			want: decision{act: actRetry}, after: retryAfter{stale: 1}},
		{name: "stale pooled connections past the bound back off", cl: rWrite, before: slices.Repeat([]attemptResult{rTransport(ra, errStaleConn, 0)}, maxStaleResends), r: rTransport(ra, errStaleConn, 0),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{stale: maxStaleResends}},
		{name: "connection lost after sending, a read", cl: rRead, r: rLost(ra),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{unreachable: []string{ra}, reached: true}},
		{name: "connection lost after sending, a session write", cl: rSessionWrite, r: rLost(ra),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{unreachable: []string{ra}, reached: true}},
		{name: "connection lost after sending, a write without request id", cl: rWrite, r: rLost(ra),
			want: decision{act: actUnknown, forget: true}, after: retryAfter{unreachable: []string{ra}, reached: true},
			code: api.CodeUnavailable, unknown: true, suffix: true},
		{name: "connection lost after sending, a forwarded request", cl: rForward, r: rLost(ra),
			want: decision{act: actUnknown, forget: true}, after: retryAfter{unreachable: []string{ra}, reached: true},
			code: api.CodeUnavailable, suffix: true},
		{name: "the unreachable set is bounded", cl: rRead, before: eight, r: rLost(ra),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{unreachable: eightAddrs, reached: true}},

		// not_leader: never applied, always safe to resend.
		{name: "not_leader with a fresh hint", cl: rRead, r: rNotLeader(ra, rb),
			want: decision{act: actRetry, follow: true}, after: retryAfter{redirects: 1, lastAddr: ra}},
		{name: "not_leader with a fresh hint, a write without request id", cl: rWrite, r: rNotLeader(ra, rb),
			want: decision{act: actRetry, follow: true}, after: retryAfter{redirects: 1, lastAddr: ra}},
		{name: "not_leader: the fourth fresh hint in a row backs off", cl: rRead, before: []attemptResult{rNotLeader(ra, rb), rNotLeader(rb, rc), rNotLeader(rc, ra)}, r: rNotLeader(ra, rb),
			want: decision{act: actBackoff, follow: true}, after: retryAfter{redirects: maxFreeRedirects, lastAddr: ra}},
		{name: "not_leader without a hint", cl: rRead, r: rNotLeader(ra, ""),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{lastAddr: ra}},
		{name: "not_leader naming itself", cl: rRead, r: rNotLeader(ra, ra),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{lastAddr: ra}},
		{name: "not_leader naming a replica the call could not reach", cl: rRead, before: []attemptResult{rLost(rb)}, r: rNotLeader(ra, rb),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{lastAddr: ra, unreachable: []string{rb}, reached: true}},
		{name: "not_leader naming a replica unreachable before the last", cl: rRead, before: []attemptResult{rLost(rb), rLost(rc)}, r: rNotLeader(ra, rb),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{lastAddr: ra, unreachable: []string{rb, rc}, reached: true}},
		{name: "not_leader naming an unreachable replica elected since (restarted there)", cl: rRead, before: []attemptResult{rLost(rb), rLost(rc)},
			r:    rReply(ra, api.Error{Code: api.CodeNotLeader, Leader: rb, Elected: true}),
			want: decision{act: actRetry, follow: true}, after: retryAfter{redirects: 1, lastAddr: ra, unreachable: []string{rc}, reached: true}},
		{name: "not_leader from a replica unreachable before, naming a fresh one", cl: rRead, before: []attemptResult{rLost(ra)}, r: rNotLeader(ra, rb),
			want: decision{act: actRetry, follow: true}, after: retryAfter{redirects: 1, lastAddr: ra, reached: true}},
		{name: "not_leader resets the unavailable count", cl: rRead, before: []attemptResult{rUnavail(ra)}, r: rNotLeader(ra, rb),
			want: decision{act: actRetry, follow: true}, after: retryAfter{redirects: 1, lastAddr: ra, reached: true}},

		// unavailable: the outcome is unknown.
		{name: "unavailable once", cl: rSessionWrite, r: rUnavail(ra),
			want: decision{act: actBackoff}, after: retryAfter{unavail: 1, lastAddr: ra, reached: true}},
		{name: "unavailable twice from one replica: look at another", cl: rSessionWrite, before: []attemptResult{rUnavail(ra)}, r: rUnavail(ra),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{lastAddr: ra, reached: true}},
		{name: "unavailable only at the end of the attempt: look at another at once", cl: rSessionWrite, r: rHeldOut(ra),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{lastAddr: ra, reached: true}},
		{name: "unavailable from another replica counts afresh", cl: rRead, before: []attemptResult{rUnavail(ra)}, r: rUnavail(rb),
			want: decision{act: actBackoff}, after: retryAfter{unavail: 1, lastAddr: rb, reached: true}},
		{name: "a transport failure between unavailable replies keeps the count", cl: rRead, before: []attemptResult{rUnavail(ra), rLost(rb)}, r: rUnavail(ra),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{lastAddr: ra, unreachable: []string{rb}, reached: true}},
		{name: "after rotating, the same replica counts from one", cl: rRead, before: []attemptResult{rUnavail(ra), rUnavail(ra)}, r: rUnavail(ra),
			want: decision{act: actBackoff}, after: retryAfter{unavail: 1, lastAddr: ra, reached: true}},
		{name: "unavailable, a write without request id", cl: rWrite, r: rUnavail(ra),
			want: decision{act: actUnknown}, after: retryAfter{unavail: 1, lastAddr: ra, reached: true},
			code: api.CodeUnavailable, unknown: true, suffix: true},
		{name: "unavailable, a forwarded request", cl: rForward, r: rUnavail(ra),
			want: decision{act: actUnknown}, after: retryAfter{unavail: 1, lastAddr: ra, reached: true},
			code: api.CodeUnavailable},

		// unavailable and not_applied: the state refused it; a write is resent.
		{name: "not applied, a write without request id", cl: rWrite, r: rNotApplied(ra),
			want: decision{act: actBackoff}, after: retryAfter{lastAddr: ra}},
		{name: "not applied twice: stay with the replica", cl: rWrite, before: []attemptResult{rNotApplied(ra)}, r: rNotApplied(ra),
			want: decision{act: actBackoff}, after: retryAfter{lastAddr: ra}},
		{name: "not applied four times from one replica: look at another (a lockd whose view lags names no leader)", cl: rWrite,
			before: []attemptResult{rNotApplied(ra), rNotApplied(ra), rNotApplied(ra)}, r: rNotApplied(ra),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{lastAddr: ra}},
		{name: "unsure, not applied, unsure from one replica: rotate (an overloaded leader mixing busy and timeouts)", cl: rSessionWrite,
			before: []attemptResult{rUnavail(ra), rNotApplied(ra)}, r: rUnavail(ra),
			want: decision{act: actBackoff, forget: true}, after: retryAfter{lastAddr: ra, reached: true}},
		{name: "not applied from another replica counts from one", cl: rWrite,
			before: []attemptResult{rNotApplied(ra), rNotApplied(ra), rNotApplied(ra)}, r: rNotApplied(rb),
			want: decision{act: actBackoff}, after: retryAfter{lastAddr: rb}},
		{name: "not applied after an unsure unavailable: still resent, still reached", cl: rSessionWrite, before: []attemptResult{rUnavail(ra)}, r: rNotApplied(rb),
			want: decision{act: actBackoff}, after: retryAfter{lastAddr: rb, reached: true}},
		{name: "moved after the write was refused not applied", cl: rWrite, before: []attemptResult{rNotApplied(ra)}, r: rRefusal(ra, api.CodeMoved),
			want: decision{act: actRefresh}, after: retryAfter{lastAddr: ra}, code: api.CodeMoved},

		// wrong_cell and moved: reload the directory; the caller routes again.
		{name: "wrong_cell", cl: rRead, r: rRefusal(ra, api.CodeWrongCell),
			want: decision{act: actRefresh}, after: retryAfter{lastAddr: ra}, code: api.CodeWrongCell},
		{name: "wrong_cell after a lost attempt of a read", cl: rRead, before: []attemptResult{rLost(ra)}, r: rRefusal(rb, api.CodeWrongCell),
			want: decision{act: actRefresh}, after: retryAfter{lastAddr: rb, unreachable: []string{ra}, reached: true}, code: api.CodeWrongCell},
		{name: "moved, a write not sent before", cl: rWrite, r: rRefusal(ra, api.CodeMoved),
			want: decision{act: actRefresh}, after: retryAfter{lastAddr: ra}, code: api.CodeMoved},
		{name: "moved after an attempt of the write was lost", cl: rSessionWrite, before: []attemptResult{rLost(ra)}, r: rRefusal(rb, api.CodeMoved),
			want: decision{act: actRefresh}, after: retryAfter{lastAddr: rb, unreachable: []string{ra}, reached: true},
			code: api.CodeUnavailable, unknown: true, suffix: true},
		{name: "moved after the write was answered unavailable", cl: rSessionWrite, before: []attemptResult{rUnavail(ra)}, r: rRefusal(ra, api.CodeMoved),
			want: decision{act: actRefresh}, after: retryAfter{unavail: 1, lastAddr: ra, reached: true},
			code: api.CodeUnavailable, unknown: true, suffix: true},

		// Every other code is a final answer.
		{name: "session_expired after a lost attempt (Session.sendWrite reports reached)", cl: rSessionWrite, before: []attemptResult{rLost(ra)}, r: rRefusal(rb, api.CodeSessionExpired),
			want: decision{act: actFail}, after: retryAfter{lastAddr: rb, unreachable: []string{ra}, reached: true}, code: api.CodeSessionExpired},
		{name: "a code this SDK does not know, with 503", cl: rRead, r: rWith(rRefusal(ra, "overloaded_v2"), func(r *attemptResult) { r.status = 503 }),
			want: decision{act: actFail}, after: retryAfter{lastAddr: ra}, code: "overloaded_v2"},
		{name: "not JSON, 503 (a router answered)", cl: rRead, r: rRaw(ra, 503, "<html>busy</html>"),
			want: decision{act: actBackoff}, after: retryAfter{unavail: 1, lastAddr: ra, reached: true}},
		{name: "not JSON, 502", cl: rRead, r: rRaw(ra, 502, "bad gateway"),
			want: decision{act: actBackoff}, after: retryAfter{unavail: 1, lastAddr: ra, reached: true}},
		{name: "not JSON, 504", cl: rRead, r: rRaw(ra, 504, ""),
			want: decision{act: actBackoff}, after: retryAfter{unavail: 1, lastAddr: ra, reached: true}},
		{name: "not JSON, 401", cl: rRead, r: rRaw(ra, 401, "no"),
			want: decision{act: actFail}, after: retryAfter{lastAddr: ra}, code: api.CodeUnauthorized},
		{name: "not JSON, 403", cl: rRead, r: rRaw(ra, 403, "no"),
			want: decision{act: actFail}, after: retryAfter{lastAddr: ra}, code: api.CodeUnauthorized},
		{name: "not JSON, 500", cl: rRead, r: rRaw(ra, 500, "oops"),
			want: decision{act: actFail}, after: retryAfter{lastAddr: ra}, code: api.CodeInternal},
		{name: "not JSON, 404", cl: rRead, r: rRaw(ra, 404, "not here"),
			want: decision{act: actFail}, after: retryAfter{lastAddr: ra}, code: api.CodeInternal},
	}
	for _, code := range []api.Code{
		api.CodeNoNode, api.CodeNodeExists, api.CodeVersionMismatch, api.CodeNotEmpty, api.CodeValueTooLarge,
		api.CodeInvalidPath, api.CodeBadRequest, api.CodeStaleRequest, api.CodeSessionExpired, api.CodeNoSession,
		api.CodeUnauthorized, api.CodeForbidden, api.CodeTokenExhausted, api.CodeLimitExceeded, api.CodeQuotaExceeded,
		api.CodeNotFound, api.CodeConflict, api.CodeMigrationInProgress, api.CodeCopyMismatch, api.CodeInternal,
	} {
		cases = append(cases, retryCase{name: "final: " + string(code), cl: rSessionWrite, r: rRefusal(ra, code),
			want: decision{act: actFail}, after: retryAfter{lastAddr: ra}, code: code})
	}
	return cases
}

// TestRetryDecisions runs the decision table through observe, decide and
// settle: what do does with each attempt, without a network.
func TestRetryDecisions(t *testing.T) {
	for _, tc := range retryCases() {
		t.Run(tc.name, func(t *testing.T) {
			cl := tc.cl
			var st retryState
			for i, r := range tc.before {
				if _, d := retryStep(&cl, &st, r); d.act != actRetry && d.act != actBackoff {
					t.Fatalf("attempt %d before (%s): %+v ends the call", i, r.addr, d)
				}
			}
			o, d := retryStep(&cl, &st, tc.r)
			if d != tc.want {
				t.Errorf("decision %+v, want %+v (outcome %+v)", d, tc.want, o)
			}
			got := retryAfter{redirects: st.redirects, unavail: st.unavail, stale: st.stale, lastAddr: st.lastAddr,
				refused: st.refused, unreachable: cl.unreachable, reached: cl.reached}
			if got.redirects != tc.after.redirects || got.unavail != tc.after.unavail || got.stale != tc.after.stale || got.lastAddr != tc.after.lastAddr ||
				!slices.Equal(got.refused, tc.after.refused) || !slices.Equal(got.unreachable, tc.after.unreachable) || got.reached != tc.after.reached {
				t.Errorf("after: %+v, want %+v", got, tc.after)
			}
			switch d.act {
			case actFail, actUnknown, actRefresh:
			default:
				if tc.code != "" {
					t.Errorf("act %v is no final answer, want error %s", d.act, tc.code)
				}
				return
			}
			err := finalError(&cl, o, d.act, st.last)
			if api.CodeOf(err) != tc.code {
				t.Errorf("error %v: code %q, want %q", err, api.CodeOf(err), tc.code)
			}
			if errors.Is(err, ErrOutcomeUnknown) != tc.unknown {
				t.Errorf("error %v: outcome unknown %v, want %v", err, !tc.unknown, tc.unknown)
			}
			if strings.HasSuffix(err.Error(), "; the outcome is unknown") != tc.suffix {
				t.Errorf("error %q: says the outcome is unknown: %v, want %v", err, !tc.suffix, tc.suffix)
			}
		})
	}
}

// A refusal after an earlier attempt that was lost keeps the refusal's own
// code as the cause of the outcome-unknown error.
func TestFinalErrorKeepsTheRefusal(t *testing.T) {
	cl := rSessionWrite
	var st retryState
	retryStep(&cl, &st, rLost(ra))
	o, d := retryStep(&cl, &st, rRefusal(rb, api.CodeMoved))
	err := finalError(&cl, o, d.act, st.last)
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if !errors.Is(err, &api.Error{Code: api.CodeMoved}) {
		t.Fatalf("err = %v does not wrap the moved refusal", err)
	}
}

// TestGaveUp: the error of a call whose context ended.
func TestGaveUp(t *testing.T) {
	last := api.Errorf(api.CodeUnavailable, "a:1 /v1/put: EOF")
	cases := []struct {
		name     string
		cell     string
		cl       call
		last     *api.Error
		unknown  bool
		contains []string
	}{
		{"a read", "demo", call{route: api.RouteGet, attempts: 2}, nil, false, []string{`on cell "demo"`, "gave up after 2 attempts", "context deadline exceeded"}},
		{"a directory read", "", call{route: api.RouteDirectory, attempts: 1}, last, false, []string{"from any endpoint", "(last error: unavailable: a:1 /v1/put: EOF)"}},
		{"a write never sent", "demo", call{route: api.RoutePut, write: true, attempts: 3}, last, false, []string{"gave up after 3 attempts"}},
		{"a write that may have reached the cell", "demo", call{route: api.RoutePut, write: true, reached: true, attempts: 3}, last, true, []string{"gave up after 3 attempts", "the outcome is unknown"}},
		{"a read that reached the cell", "demo", call{route: api.RouteGet, reached: true, attempts: 3}, last, false, nil},
	}
	for _, tc := range cases {
		err := gaveUp(tc.cell, &tc.cl, tc.last, context.DeadlineExceeded)
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v does not match unavailable and the context's error", tc.name, err)
		}
		if errors.Is(err, ErrOutcomeUnknown) != tc.unknown {
			t.Errorf("%s: %v outcome unknown %v, want %v", tc.name, err, !tc.unknown, tc.unknown)
		}
		for _, s := range tc.contains {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q lacks %q", tc.name, err, s)
			}
		}
	}
}

// TestNoClusterErr: nothing listens at any endpoint.
func TestNoClusterErr(t *testing.T) {
	err := noClusterErr([]string{ra, rb}, 2040*time.Millisecond)
	if !errors.Is(err, ErrNoCluster) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("%v does not match ErrNoCluster and ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "no lockd listens at a:1, b:1") || !strings.Contains(err.Error(), "for 2s") {
		t.Fatalf("err = %q", err)
	}
}
