package proxy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// TestProxyViewBehindTheClient: a request naming a cell the proxy's
// directory view lacks, even after a read, is refused wrong_cell unless
// its client routed by a later directory (api.HeaderDirectoryIndex: a
// cell created since): then unavailable, not applied, to be sent again.
// Forwarded requests and KeepAlives alike; a malformed index is a
// bad_request. Mutant lockproxy_broken_viewbehind fails the later-index
// rows (sdk TestCellCallsSayTheirDirectoryIndex is its row).
func TestProxyViewBehindTheClient(t *testing.T) {
	_, p := startOnFake(t, Config{})
	ask := func(route, body, index string) (int, api.Error) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://" + p.Addr() + route)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.Set(api.HeaderCell, "nope")
		if index != "" {
			req.Header.Set(api.HeaderDirectoryIndex, index)
		}
		req.SetBodyString(body)
		if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		var reply api.ErrorResponse
		if err := json.Unmarshal(resp.Body(), &reply); err != nil || reply.Error == nil {
			t.Fatalf("%s: %d %s", route, resp.StatusCode(), resp.Body())
		}
		return resp.StatusCode(), *reply.Error
	}
	put := `{"path":"/demo/x","value":"djE="}`
	keepAlive := `{"cell":"nope","session":7,"secret":"0123456789abcdef0123456789abcdef"}`
	cases := []struct {
		name, route, body, index string
		code                     api.Code
		notApplied               bool
	}{
		{"a put, no index", api.RoutePut, put, "", api.CodeWrongCell, false},
		{"a put, an older index", api.RoutePut, put, "1", api.CodeWrongCell, false},
		{"a put, a later index", api.RoutePut, put, "1000000", api.CodeUnavailable, true},
		{"a put, a malformed index", api.RoutePut, put, "x", api.CodeBadRequest, false},
		{"a KeepAlive, no index", api.RouteSessionKeepAlive, keepAlive, "", api.CodeWrongCell, false},
		{"a KeepAlive, a later index", api.RouteSessionKeepAlive, keepAlive, "1000000", api.CodeUnavailable, true},
	}
	for _, tc := range cases {
		status, e := ask(tc.route, tc.body, tc.index)
		if e.Code != tc.code || e.NotApplied != tc.notApplied || status != tc.code.HTTPStatus() {
			t.Errorf("%s: %d %+v; want %s, not_applied %v", tc.name, status, e, tc.code, tc.notApplied)
		}
	}
}
