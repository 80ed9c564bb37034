package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// countingListener counts the bytes its connections read.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.read}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// TestBodyBoundFromHeader: the server reads a body whole, within the
// bound RequestConfig gives from the header, and a body past it is
// refused unread, as the handler would refuse it: a stranger's as
// unauthorized, anyone's on a route that takes none as value_too_large, an
// authenticated caller's past its route's limit as value_too_large; an
// admin's batch up to api.MaxBatchBody reaches the handler.
func TestBodyBoundFromHeader(t *testing.T) {
	s := wireTestServer(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: raw}
	srv := &fasthttp.Server{Handler: s.Handler, ErrorHandler: s.ErrorHandler, HeaderReceived: s.RequestConfig,
		MaxRequestBodySize: api.MaxRequestBody, ReduceMemoryUsage: true}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()
	const big = 1 << 20
	admin := "Bearer " + wireTestAdmin
	for _, tc := range []struct {
		name, method, route, auth string
		size                      int
		chunked                   bool
		want                      api.Code
		readAll                   bool // the body reaches the handler
	}{
		{"no token, 1 MiB put", "POST", api.RoutePut, "", big, false, api.CodeUnauthorized, false},
		{"unknown token, 1 MiB put", "POST", api.RoutePut, "Bearer lkd_nobody", big, false, api.CodeUnauthorized, false},
		{"admin, 1 MiB put", "POST", api.RoutePut, admin, big, false, api.CodeValueTooLarge, false},
		{"admin, 1 MiB put, chunked", "POST", api.RoutePut, admin, big, true, api.CodeValueTooLarge, false},
		{"no token, 1 MiB put, chunked", "POST", api.RoutePut, "", big, true, api.CodeValueTooLarge, false},
		{"no token, 1 MiB batch", "POST", api.RouteKeepAliveBatch, "", big, false, api.CodeUnauthorized, false},
		{"unknown token, 1 MiB batch", "POST", api.RouteKeepAliveBatch, "Bearer lkd_nobody", big, false, api.CodeUnauthorized, false},
		{"admin, 1 MiB batch", "POST", api.RouteKeepAliveBatch, admin, big, false, api.CodeBadRequest, true},
		{"admin, 1 MiB batch, path not normalized", "POST", "/" + api.RouteKeepAliveBatch, admin, big, false, api.CodeBadRequest, true},
		{"no token, 1 MiB batch, path not normalized", "POST", "/" + api.RouteKeepAliveBatch, "", big, false, api.CodeUnauthorized, false},
		{"no token, body to /healthz", "POST", api.RouteHealth, "", 100, false, api.CodeValueTooLarge, false},
		{"admin, body to /v1/status", "GET", api.RouteStatus, admin, 100, false, api.CodeValueTooLarge, false},
		{"admin, a GET with a body to a POST route", "GET", api.RoutePut, admin, 100, false, api.CodeBadRequest, false},
		{"no token, a GET with a body to a POST route", "GET", api.RoutePut, "", 100, false, api.CodeUnauthorized, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ln.read.Load()
			status, body := rawRequest(t, raw.Addr().String(), tc.method, tc.route, tc.auth, tc.size, tc.chunked)
			read := ln.read.Load() - before
			var er api.ErrorResponse
			if err := json.Unmarshal(body, &er); err != nil || er.Error == nil {
				t.Fatalf("HTTP %d %q: not an API error", status, body)
			}
			if er.Error.Code != tc.want {
				t.Fatalf("HTTP %d %s, want %s", status, er.Error, tc.want)
			}
			if !tc.readAll && read > int64(api.MaxRequestBody)+64<<10 {
				t.Fatalf("%d bytes read of a body refused", read)
			}
			if tc.readAll && read < int64(tc.size) {
				t.Fatalf("%d bytes read, want the whole body (%d)", read, tc.size)
			}
		})
	}
}

// rawRequest sends one request with a body of size bytes (chunked, or with
// its length) on a connection of its own and reads the answer; the server
// may close the connection before the body is sent.
func rawRequest(t *testing.T, addr, method, route, auth string, size int, chunked bool) (int, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var h strings.Builder
	fmt.Fprintf(&h, "%s %s HTTP/1.1\r\nHost: lockd\r\nContent-Type: application/json\r\n", method, route)
	if auth != "" {
		fmt.Fprintf(&h, "%s: %s\r\n", api.HeaderAuth, auth)
	}
	if chunked {
		h.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	} else {
		fmt.Fprintf(&h, "Content-Length: %d\r\n\r\n", size)
	}
	go func() {
		if _, err := c.Write([]byte(h.String())); err != nil {
			return
		}
		chunk := []byte(strings.Repeat("x", 32<<10))
		for sent := 0; sent < size; sent += len(chunk) {
			if chunked {
				if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
					return
				}
			} else if _, err := c.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
				return
			}
		}
		if chunked {
			_, _ = c.Write([]byte("0\r\n\r\n"))
		}
	}()
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(c)); err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...)
}

// TestOversizeRefusalAsksARetry: an admin's batch refused at the header
// only because its token was new to the lockd then (the hook gave it the
// ordinary bound) is answered unavailable and not applied, so a client
// retries it whatever the call.
func TestOversizeRefusalAsksARetry(t *testing.T) {
	s := wireTestServer(t)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI(api.RouteKeepAliveBatch)
	ctx.Request.Header.Set(api.HeaderAuth, "Bearer "+wireTestAdmin)
	ctx.Request.Header.SetContentLength(1 << 20)
	s.ErrorHandler(&ctx, fasthttp.ErrBodyTooLarge)
	var er api.ErrorResponse
	if err := json.Unmarshal(ctx.Response.Body(), &er); err != nil || er.Error == nil {
		t.Fatalf("HTTP %d %q", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if er.Error.Code != api.CodeUnavailable || !er.Error.NotApplied || !ctx.Response.ConnectionClose() {
		t.Fatalf("HTTP %d %+v (connection close %v): want unavailable, not applied, closed", ctx.Response.StatusCode(), er.Error, ctx.Response.ConnectionClose())
	}
}
