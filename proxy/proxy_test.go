package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

// startOnFake starts a proxy named p1 (cfg's other fields as given) in
// front of a fake cell demo; both stop when the test ends.
func startOnFake(t *testing.T, cfg Config) (*fake.Cell, *Proxy) {
	t.Helper()
	fc, err := fake.New(fake.Options{Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg.Name, cfg.Listen, cfg.Lockds = "p1", "127.0.0.1:0", fc.Endpoints()
	p, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return fc, p
}

// TestForwardPassesTheClientsAuthorization: a request through the proxy
// reaches the cell with its client's Authorization header, not the
// proxy's, and the cell's answer comes back as it was.
func TestForwardPassesTheClientsAuthorization(t *testing.T) {
	fc, p := startOnFake(t, Config{})

	for _, auth := range []string{"Bearer tenant-a", ""} {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI("http://" + p.Addr() + api.RoutePut)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.Set(api.HeaderCell, "demo")
		if auth != "" {
			req.Header.Set(api.HeaderAuth, auth)
		}
		req.SetBodyString(`{"path":"/demo/x","value":"djE="}`)
		if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != 200 {
			t.Fatalf("put through the proxy: %d %s", resp.StatusCode(), resp.Body())
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		puts := fc.Requests(api.RoutePut)
		if got := puts[len(puts)-1].Auth; got != auth {
			t.Fatalf("the cell got Authorization %q, want the client's %q", got, auth)
		}
	}
	if n, ok := fc.Node("/demo/x"); !ok || string(n.Value) != "v1" {
		t.Fatalf("node %+v %v", n, ok)
	}

	// A KeepAlive for a cell the directory does not have is refused once
	// a directory read that began after it arrived does not name the cell
	// either (a cell created a moment ago would be found); such requests
	// share reads, which start api.DirectoryRefreshGap apart at least:
	// one after another, and all at once.
	keepAliveNope := func() error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://" + p.Addr() + api.RouteSessionKeepAlive)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetBodyString(`{"cell":"nope","session":7,"secret":"0123456789abcdef0123456789abcdef"}`)
		if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
			return err
		}
		if resp.StatusCode() != api.CodeWrongCell.HTTPStatus() {
			return fmt.Errorf("keepalive on an unknown cell: %d %s", resp.StatusCode(), resp.Body())
		}
		return nil
	}
	before, start := len(fc.Requests(api.RouteDirectory)), time.Now()
	for i := 0; i < 20; i++ {
		if err := keepAliveNope(); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	if n := len(fc.Requests(api.RouteDirectory)) - before; n < 1 || n > int(elapsed/api.DirectoryRefreshGap)+2 {
		t.Fatalf("%d directory reads in %v for 20 requests naming an unknown cell, one after another: want at least one, at most one per %v",
			n, elapsed, api.DirectoryRefreshGap)
	}
	before = len(fc.Requests(api.RouteDirectory))
	errs := make(chan error, 50)
	for range 50 {
		go func() { errs <- keepAliveNope() }()
	}
	for range 50 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(fc.Requests(api.RouteDirectory)) - before; n > 3 {
		t.Fatalf("%d directory reads for 50 requests at once naming an unknown cell: they must share reads", n)
	}
}

// TestConnectionLimit: past its connection limit (the named limit
// MaxConnectionsPerProxy, shrunk here) the proxy answers a new connection
// 503 and serves the ones it has.
func TestConnectionLimit(t *testing.T) {
	_, p := startOnFake(t, Config{MaxConns: 2})
	get := func(c net.Conn) string {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: p\r\n\r\n")); err != nil {
			return err.Error()
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err.Error()
		}
		return strings.TrimSpace(line)
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if got := get(c); got != "HTTP/1.1 200 OK" {
			t.Fatalf("connection %d: %q", i+1, got)
		}
	}
	extra, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if got := get(extra); !strings.Contains(got, "503") {
		t.Fatalf("a third connection past the limit of 2: %q, want 503", got)
	}
	if got := get(held[0]); got != "HTTP/1.1 200 OK" {
		t.Fatalf("a held connection after the refusal: %q", got)
	}
}
