package httpapi

import (
	"bufio"
	"crypto/tls"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/tlsutil"
)

// parkServer serves s's handler, with "/park" parking every request and
// answering it after delay (negative: before the handler returns, so the
// answer waits for the hijack), on a fasthttp server that keeps hijacked
// connections as lockd's does.
func parkServer(t *testing.T, s *Server, delay time.Duration, cfg *tls.Config) string {
	t.Helper()
	h := func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != "/park" {
			s.Handler(ctx)
			return
		}
		if !s.canPark(ctx) {
			ctx.SetStatusCode(fasthttp.StatusTeapot)
			return
		}
		pk := s.newParked(ctx, time.Now())
		resp := api.SessionResponse{Session: 7, LeaseMS: 12000}
		if delay < 0 {
			pk.answer(resp, nil)
		} else {
			time.AfterFunc(delay, func() { pk.answer(resp, nil) })
		}
		pk.hijack(ctx)
	}
	// Idle workers end at once, so that a count of goroutines sees only
	// what holds a request (TestParkedHoldsNoGoroutine).
	srv := &fasthttp.Server{Handler: h, ReduceMemoryUsage: true, KeepHijackedConns: true, StreamRequestBody: true,
		MaxIdleWorkerDuration: 10 * time.Millisecond}
	s.ServeConns(srv.ServeConn)
	return serveOn(t, s, srv, cfg)
}

// serveOn serves srv on a loopback port (TLS when cfg is set) until the
// test ends, then closes s and shuts srv down; it returns the address.
func serveOn(t *testing.T, s *Server, srv *fasthttp.Server, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		_ = srv.Shutdown()
	})
	return ln.Addr().String()
}

const parkReq = "POST /park HTTP/1.1\r\nHost: lockd\r\nContent-Length: 0\r\n\r\n"
const healthReq = "GET " + api.RouteHealth + " HTTP/1.1\r\nHost: lockd\r\n\r\n"

// readAnswers reads n HTTP responses from c and returns their bodies.
func readAnswers(t *testing.T, c net.Conn, n int) []string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	var out []string
	for range n {
		var resp fasthttp.Response
		if err := resp.Read(br); err != nil {
			t.Fatalf("answer %d of %d: %v", len(out)+1, n, err)
		}
		out = append(out, string(resp.Body()))
	}
	return out
}

// TestParkedKeepAliveAnswered: a parked request is answered on its
// connection whichever comes first, its answer or its hijack; the
// connection is then served again, requests pipelined behind the parked
// one included, over plain TCP and TLS with the client certificate still
// seen.
func TestParkedKeepAliveAnswered(t *testing.T) {
	node, client, err := tlsutil.DevCA(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		delay     time.Duration
		tls       bool
		pipelined bool
	}{
		{"answer after the hijack", 50 * time.Millisecond, false, false},
		{"answer before the hijack", -1, false, false},
		{"pipelined behind it", 50 * time.Millisecond, false, true},
		{"tls", 50 * time.Millisecond, true, false},
		{"tls, pipelined", 50 * time.Millisecond, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := wireTestServer(t)
			var srvCfg, cliCfg *tls.Config
			if tc.tls {
				if srvCfg, err = node.Server(); err != nil {
					t.Fatal(err)
				}
				if cliCfg, err = client.Client(); err != nil {
					t.Fatal(err)
				}
				s.RequireClientCerts()
			}
			addr := parkServer(t, s, tc.delay, srvCfg)
			var c net.Conn
			var err error
			if tc.tls {
				c, err = tls.Dial("tcp", addr, cliCfg)
			} else {
				c, err = net.Dial("tcp", addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for round := range 3 {
				if tc.pipelined {
					_, err = c.Write([]byte(parkReq + healthReq))
				} else {
					_, err = c.Write([]byte(parkReq))
				}
				if err != nil {
					t.Fatal(err)
				}
				n := 1
				if tc.pipelined {
					n = 2
				}
				got := readAnswers(t, c, n)
				if !strings.Contains(got[0], `"session":7`) || (tc.pipelined && got[1] != "ok\n") {
					t.Fatalf("round %d: answers %q, want the KeepAlive's then (pipelined) the health check's", round, got)
				}
			}
			// The connection is served by fasthttp again: a route that
			// needs the client certificate (over TLS) is not refused
			// for want of one.
			if _, err := c.Write([]byte("GET /v1/status HTTP/1.1\r\nHost: lockd\r\nAuthorization: Bearer " + wireTestAdmin + "\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			if got := readAnswers(t, c, 1)[0]; strings.Contains(got, "client certificate") {
				t.Fatalf("after parking: %s", got)
			}
		})
	}
}

// TestParkedHoldsNoGoroutine: parked requests hold no goroutine (neither
// fasthttp's worker nor the hijack's) until they are answered.
func TestParkedHoldsNoGoroutine(t *testing.T) {
	s := wireTestServer(t)
	addr := parkServer(t, s, time.Hour, nil)
	before := runtime.NumGoroutine()
	const n = 200
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(parkReq)); err != nil {
			t.Fatal(err)
		}
	}
	var parkedNow, goroutines int
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		parkedNow = s.parks.Held()
		goroutines = runtime.NumGoroutine() - before
		// fasthttp keeps a few idle workers for a while: each request
		// holding one would add n.
		if parkedNow == n && goroutines < n/2 {
			return
		}
	}
	t.Fatalf("%d parked, %d goroutines more than before: want %d parked and no goroutine each", parkedNow, goroutines, n)
}
