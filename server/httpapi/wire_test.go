package httpapi

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

const wireTestAdmin = "admin-token-for-wire-tests"

func wireTestServer(t *testing.T) *Server {
	t.Helper()
	dir, err := directory.New(api.DirectoryResponse{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(noCells{dir: dir}, func() api.StatusResponse { return api.StatusResponse{} }, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	s.dir.gap = 0
	s.EnableAuth(wireTestAdmin)
	return s
}

// post sends one request with body and content type ct.
func post(s *Server, route, ct, auth string, body []byte) *fasthttp.Response {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI(route)
	ctx.Request.Header.SetContentType(ct)
	ctx.Request.Header.Set(api.HeaderWaitLeaderMS, "0")
	if auth != "" {
		ctx.Request.Header.Set(api.HeaderAuth, "Bearer "+auth)
	}
	ctx.Request.SetBody(body)
	s.Handler(&ctx)
	var resp fasthttp.Response
	ctx.Response.CopyTo(&resp)
	return &resp
}

// errorOf is a refusal's status and code (a refusal is JSON whatever the
// request's encoding).
func errorOf(t *testing.T, r *fasthttp.Response) (int, api.Code) {
	t.Helper()
	if ct := string(r.Header.ContentType()); ct != "application/json" {
		t.Fatalf("refusal in %q, want JSON", ct)
	}
	var er api.ErrorResponse
	if err := json.Unmarshal(r.Body(), &er); err != nil || er.Error == nil {
		t.Fatalf("status %d, body %q: not an error response", r.StatusCode(), r.Body())
	}
	return r.StatusCode(), er.Error.Code
}

// TestKeepAliveWireMatchesJSON: a binary KeepAlive or batch and the same
// request in JSON get the same answer, with the checks in the same order
// (authentication first, then the body, then the session and cell).
func TestKeepAliveWireMatchesJSON(t *testing.T) {
	s := wireTestServer(t)
	cases := []struct {
		name  string
		route string
		auth  string
		msg   api.WireEncoder
		want  api.Code
	}{
		{"no token", api.RouteSessionKeepAlive, "", &api.KeepAliveRequest{Cell: "demo", Session: 7}, api.CodeUnauthorized},
		{"bad token", api.RouteKeepAliveBatch, "nope", &api.KeepAliveBatchRequest{Cell: "demo"}, api.CodeUnauthorized},
		{"no session", api.RouteSessionKeepAlive, wireTestAdmin, &api.KeepAliveRequest{Cell: "demo"}, api.CodeNoSession},
		{"unknown cell", api.RouteSessionKeepAlive, wireTestAdmin, &api.KeepAliveRequest{Cell: "nowhere", Session: 7, Secret: "s", WaitMS: 10}, api.CodeWrongCell},
		{"batch unknown cell", api.RouteKeepAliveBatch, wireTestAdmin, &api.KeepAliveBatchRequest{Cell: "nowhere", Proxy: "p", Sessions: []uint64{1}, AgeMS: []int64{0}}, api.CodeWrongCell},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, _ := json.Marshal(c.msg)
			js, jc := errorOf(t, post(s, c.route, "application/json", c.auth, j))
			ws, wc := errorOf(t, post(s, c.route, api.ContentTypeWire, c.auth, c.msg.AppendWire(nil)))
			if jc != c.want || wc != jc || ws != js {
				t.Fatalf("JSON %d %s, binary %d %s; want both %s", js, jc, ws, wc, c.want)
			}
		})
	}
}

// TestKeepAliveWireRefusals: a binary body that does not decode is
// refused bad_request (400, in JSON), as malformed JSON is; binary on a
// route that does not take it is not decoded as binary.
func TestKeepAliveWireRefusals(t *testing.T) {
	s := wireTestServer(t)
	good := (&api.KeepAliveRequest{Cell: "demo", Session: 7}).AppendWire(nil)
	for _, c := range []struct {
		name, route string
		body        []byte
	}{
		{"truncated", api.RouteSessionKeepAlive, good[:len(good)-1]},
		{"trailing", api.RouteSessionKeepAlive, append(append([]byte{}, good...), 9)},
		{"version 2", api.RouteSessionKeepAlive, append([]byte{2}, good[1:]...)},
		{"batch kind to keepalive", api.RouteSessionKeepAlive, (&api.KeepAliveBatchRequest{}).AppendWire(nil)},
		{"json labelled binary", api.RouteKeepAliveBatch, []byte(`{"cell":"demo"}`)},
		{"binary to open", api.RouteSessionOpen, good},
	} {
		status, code := errorOf(t, post(s, c.route, api.ContentTypeWire, wireTestAdmin, c.body))
		if status != fasthttp.StatusBadRequest || code != api.CodeBadRequest {
			t.Errorf("%s: %d %s, want 400 bad_request", c.name, status, code)
		}
	}
}

// TestReplyNegotiated: a success is answered in the request's encoding
// (binary only on the KeepAlive routes), both decoding to the same reply.
func TestReplyNegotiated(t *testing.T) {
	s := wireTestServer(t)
	want := api.SessionResponse{Session: 7, LeaseMS: 12000, Epoch: 3, Index: 99, LeaseAgeMS: 5, CacheMS: 1500,
		Events: []api.Event{{Type: api.EventInvalidate, Path: "/demo/a", Seq: 4}}}
	answer := func(route, ct string) *fasthttp.Response {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(route)
		ctx.Request.Header.SetContentType(ct)
		if s.reply(&ctx, want, nil) != "ok" {
			t.Fatalf("%s %s: reply failed", route, ct)
		}
		var r fasthttp.Response
		ctx.Response.CopyTo(&r)
		return &r
	}
	bin := answer(api.RouteSessionKeepAlive, api.ContentTypeWire)
	if ct := string(bin.Header.ContentType()); ct != api.ContentTypeWire {
		t.Fatalf("binary KeepAlive answered in %q", ct)
	}
	var got api.SessionResponse
	if err := got.UnmarshalWire(bin.Body()); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("binary reply %+v (%v), want %+v", got, err, want)
	}
	for _, c := range [][2]string{{api.RouteSessionKeepAlive, "application/json"}, {api.RouteSessionOpen, api.ContentTypeWire}} {
		r := answer(c[0], c[1])
		var viaJSON api.SessionResponse
		if err := json.Unmarshal(r.Body(), &viaJSON); err != nil || !reflect.DeepEqual(viaJSON, want) {
			t.Fatalf("%s in %s: reply %q, want JSON of %+v", c[0], c[1], r.Body(), want)
		}
	}
}
