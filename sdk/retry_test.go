package sdk

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestDecide covers every branch of the retry policy.
func TestDecide(t *testing.T) {
	const a, b = "10.0.0.1:7001", "10.0.0.2:7001"
	reply := func(code api.Code) outcome {
		return outcome{addr: a, status: code.HTTPStatus(), code: code, retryUnsure: true}
	}
	with := func(o outcome, f func(*outcome)) outcome { f(&o); return o }
	cases := []struct {
		name string
		o    outcome
		want decision
	}{
		{"2xx", outcome{addr: a, status: 200}, decision{act: actDone}},
		{"204", outcome{addr: a, status: 204}, decision{act: actDone}},
		{"transport, context ended", outcome{addr: a, transport: true, ctxDone: true, closed: true}, decision{act: actCanceled}},
		{"transport, client closing", outcome{addr: a, transport: true, closed: true}, decision{act: actClosed}},
		{"every endpoint refused long enough", outcome{addr: a, transport: true, notSent: true, noCluster: true, retryUnsure: true}, decision{act: actNoCluster}},
		{"every endpoint refused, context ended", outcome{addr: a, transport: true, notSent: true, noCluster: true, ctxDone: true}, decision{act: actCanceled}},
		{"transport after sending, not resendable", outcome{addr: a, transport: true}, decision{act: actUnknown, forget: true}},
		{"transport after sending, resendable", outcome{addr: a, transport: true, retryUnsure: true}, decision{act: actBackoff, forget: true}},
		{"transport before sending, not resendable", outcome{addr: a, transport: true, notSent: true}, decision{act: actBackoff, forget: true}},
		{"not_leader, fresh hint", with(reply(api.CodeNotLeader), func(o *outcome) { o.hint = b }), decision{act: actRetry, follow: true}},
		{"not_leader, fresh hint, not resendable", with(reply(api.CodeNotLeader), func(o *outcome) { o.hint, o.retryUnsure = b, false }), decision{act: actRetry, follow: true}},
		{"not_leader, free redirects used", with(reply(api.CodeNotLeader), func(o *outcome) { o.hint, o.redirects = b, maxFreeRedirects }), decision{act: actBackoff, follow: true}},
		{"not_leader, no hint", reply(api.CodeNotLeader), decision{act: actBackoff, forget: true}},
		{"not_leader, hint names the replica just unreachable", with(reply(api.CodeNotLeader), func(o *outcome) { o.hint, o.unreachable = b, []string{b} }), decision{act: actBackoff, forget: true}},
		{"not_leader, hint names a replica unreachable before the last", with(reply(api.CodeNotLeader), func(o *outcome) { o.hint, o.unreachable = b, []string{b, "c:1"} }), decision{act: actBackoff, forget: true}},
		{"not_leader, hint names itself", with(reply(api.CodeNotLeader), func(o *outcome) { o.hint = a }), decision{act: actBackoff, forget: true}},
		{"unavailable, not resendable", with(reply(api.CodeUnavailable), func(o *outcome) { o.retryUnsure, o.unavailable = false, 1 }), decision{act: actUnknown}},
		{"unavailable once", with(reply(api.CodeUnavailable), func(o *outcome) { o.unavailable = 1 }), decision{act: actBackoff}},
		{"unavailable again from the same replica", with(reply(api.CodeUnavailable), func(o *outcome) { o.unavailable = unavailableRotate }), decision{act: actBackoff, forget: true}},
		{"wrong_cell", reply(api.CodeWrongCell), decision{act: actRefresh}},
		{"definite: no_node", reply(api.CodeNoNode), decision{act: actFail}},
		{"definite: version_mismatch", reply(api.CodeVersionMismatch), decision{act: actFail}},
		{"definite: session_expired", reply(api.CodeSessionExpired), decision{act: actFail}},
		{"internal", reply(api.CodeInternal), decision{act: actFail}},
		{"unknown code is final", outcome{addr: a, status: 500, code: "frobnicated", retryUnsure: true}, decision{act: actFail}},
		{"unknown code with 503 is final", outcome{addr: a, status: 503, code: "overloaded_v2", retryUnsure: true}, decision{act: actFail}},
	}
	for _, c := range cases {
		if got := decide(c.o); got != c.want {
			t.Errorf("%s: decide(%+v) = %+v, want %+v", c.name, c.o, got, c.want)
		}
	}
}

// An error code the SDK does not know is returned at once, not retried.
func TestUnknownCodeNotRetried(t *testing.T) {
	fc := newFakeCell(t, 1)
	c := newTestClient(t, fc, nil)
	fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		if route == api.RouteGet {
			return 503, &api.Error{Code: "overloaded_v2", Message: "try elsewhere"}
		}
		return next()
	})
	_, err := c.Get(testCtx(t), "/demo")
	if api.CodeOf(err) != "overloaded_v2" {
		t.Fatalf("err = %v", err)
	}
	if n := len(fc.requests(api.RouteGet)); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

// A newer directory that no longer lists the cell's last known leader
// (the cell was restored onto other lockds) makes the client forget it:
// that lockd answers wrong_cell for the cell, and would be picked forever.
func TestSetEndpointsForgetsALeaderNoLongerListed(t *testing.T) {
	cs := newCellState("dr", []string{"a:1", "b:1", "c:1"})
	cs.answered("b:1")
	cs.setEndpoints([]string{"a:1", "b:1", "d:1"})
	if got := cs.pick(); got != "b:1" {
		t.Fatalf("a leader still listed was forgotten: pick %q", got)
	}
	cs.setEndpoints([]string{"x:1", "y:1", "z:1"})
	if got := cs.pick(); got != "x:1" && got != "y:1" && got != "z:1" {
		t.Fatalf("pick %q after the cell moved to x, y and z", got)
	}
}
