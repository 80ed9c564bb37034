package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// TestBodyBoundsWithoutTLS: without TLS the proxy reads a body whole
// within the bound it picks from the header: 4 KiB for a token it does
// not know, api.MaxRequestBody for one it knows, none for a route that
// takes none; a body past it is refused unread as the handler would
// refuse it, and one past 4 KiB from a token that turns out to be known
// is asked to retry, not applied.
func TestBodyBoundsWithoutTLS(t *testing.T) {
	p := &Proxy{cfg: Config{Token: "own"}, ownDigest: api.TokenDigest("own"), ctx: context.Background()}
	p.auth.kick = make(chan struct{}, 1)
	reader := api.Tenant{Name: "reader", Grants: []api.Grant{{Prefix: "/demo", Roles: []api.Role{api.RoleWrite}}}, Tokens: []string{api.TokenDigest("r")}}
	p.auth.publish(newAuthView([]api.Tenant{reader}, 9, time.Now()))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { reply(ctx, map[string]int{"read": len(ctx.PostBody())}, nil) },
		ErrorHandler: p.errorHandler, HeaderReceived: p.requestConfig, MaxRequestBodySize: api.MaxRequestBody}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()
	for _, tc := range []struct {
		name, route, auth string
		size              int
		want              api.Code // "": reached the handler
	}{
		{"no token, a KeepAlive-sized body", api.RouteSessionKeepAlive, "", 200, ""},
		{"no token, 4 KiB", api.RoutePut, "", strangerBody, ""},
		{"no token, 8 KiB", api.RoutePut, "", 2 * strangerBody, api.CodeUnauthorized},
		{"unknown token, 8 KiB", api.RoutePut, "Bearer nope", 2 * strangerBody, api.CodeUnauthorized},
		{"known token, 200 KiB", api.RoutePut, "Bearer r", 200 << 10, ""},
		{"known token, 1 MiB", api.RoutePut, "Bearer r", 1 << 20, api.CodeValueTooLarge},
		{"own token, 200 KiB", api.RoutePut, "Bearer own", 200 << 10, ""},
		{"known token, a body to /healthz", api.RouteHealth, "Bearer r", 10, api.CodeValueTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := postRaw(t, ln.Addr().String(), tc.route, tc.auth, tc.size)
			var er api.ErrorResponse
			_ = json.Unmarshal(body, &er)
			switch {
			case tc.want == "" && (status != 200 || !strings.Contains(string(body), fmt.Sprintf(`"read":%d`, tc.size))):
				t.Fatalf("HTTP %d %s: want the whole body at the handler", status, body)
			case tc.want != "" && (er.Error == nil || er.Error.Code != tc.want):
				t.Fatalf("HTTP %d %s: want %s", status, body, tc.want)
			}
		})
	}

	// A body past 4 KiB whose token the proxy knows by the time it
	// refuses it (it was new at the header): a retry, not applied.
	var rc fasthttp.RequestCtx
	rc.Request.Header.SetMethod("POST")
	rc.Request.SetRequestURI(api.RoutePut)
	rc.Request.Header.Set(api.HeaderAuth, "Bearer r")
	rc.Request.Header.SetContentLength(2 * strangerBody)
	p.errorHandler(&rc, fasthttp.ErrBodyTooLarge)
	var er api.ErrorResponse
	if err := json.Unmarshal(rc.Response.Body(), &er); err != nil || er.Error == nil || er.Error.Code != api.CodeUnavailable || !er.Error.NotApplied {
		t.Fatalf("a token new at the header: HTTP %d %s, want unavailable, not applied", rc.Response.StatusCode(), rc.Response.Body())
	}
}

// postRaw posts size bytes to route on a connection of its own; the
// server may close it before the body is sent.
func postRaw(t *testing.T, addr, route, auth string, size int) (int, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: proxy\r\nContent-Length: %d\r\n", route, size)
	if auth != "" {
		head += api.HeaderAuth + ": " + auth + "\r\n"
	}
	go func() {
		if _, err := c.Write([]byte(head + "\r\n")); err == nil {
			_, _ = c.Write([]byte(strings.Repeat("x", size)))
		}
	}()
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...)
}
