package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/internal/connpark"
)

// TestIdleClientConnectionsParked: a client connection idle after its
// answer is held without a goroutine (lockproxy_idle_conns) and served
// again when its client speaks, plain and over mutual TLS (the client's
// certificate still seen, or /v1/status would be refused); one whose
// client paused is parked again; the proxy's Close closes what it holds.
// The bound on open connections counts parked ones (TestConnectionLimit).
func TestIdleClientConnectionsParked(t *testing.T) {
	plainAndTLS(t, func(t *testing.T, cfg Config, ccfg *tls.Config) {
		_, p := startOnFake(t, cfg)
		c := dial(t, p, ccfg)
		br := bufio.NewReader(c)
		status := func(step string) {
			t.Helper()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte("GET /v1/status HTTP/1.1\r\nHost: p\r\n\r\n")); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			var resp fasthttp.Response
			if err := resp.Read(br); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			if resp.StatusCode() != fasthttp.StatusOK {
				t.Fatalf("%s: %d %s", step, resp.StatusCode(), resp.Body())
			}
		}
		status("first request")
		awaitIdleHeld(t, p, 1)
		parks := p.conns.IdleParks()
		status("served again") // sent at once: not parked after it
		time.Sleep(50 * time.Millisecond)
		if n := p.conns.IdleParks() - parks; n != 0 || p.conns.IdleHeld() != 0 {
			t.Fatalf("a connection woken at once was parked again (%d parks, %d held)", n, p.conns.IdleHeld())
		}
		time.Sleep(connpark.IdleGap + 200*time.Millisecond)
		status("after a pause")
		awaitIdleHeld(t, p, 1)
		if p.openClients() != 1 {
			t.Fatalf("%d client connections counted open, want 1 (parked)", p.openClients())
		}
		_ = p.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(br); err != nil {
			t.Fatalf("a parked client connection outlived the proxy's Close: %v", err)
		}
	})
}

func awaitIdleHeld(t *testing.T, p *Proxy, n int) {
	t.Helper()
	for range 500 {
		if p.conns.IdleHeld() == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d client connections parked idle, want %d", p.conns.IdleHeld(), n)
}

// TestPipelinedAtTheBound: at its bound of open connections (1 here), a
// client whose second request is pipelined behind its first (so that its
// connection is handed back to fasthttp as soon as it is taken to park)
// gets both answered: fasthttp counted such a connection twice for a
// moment, and with its own bound at the listener's refused one the
// listener had admitted (503, "Server.Concurrency limit exceeded"; the
// attack review of 2026-12-07 saw 15 of 200). fasthttp's bound is now
// twice the listener's. The window is a few microseconds: with the bound
// at the listener's, -race (as make test runs it) fails 25-72 of 200; a
// build without -race seldom does, hence no mutant row.
func TestPipelinedAtTheBound(t *testing.T) {
	_, p := startOnFake(t, Config{MaxConns: 1})
	const n = 1000
	refused := 0
	for i := range n {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: p\r\n\r\nGET /healthz HTTP/1.1\r\nHost: p\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		for j := range 2 {
			var resp fasthttp.Response
			if err := resp.Read(br); err != nil || resp.StatusCode() != fasthttp.StatusOK {
				refused++
				t.Logf("connection %d, request %d: %v %d %q", i, j+1, err, resp.StatusCode(), resp.Body())
				break
			}
		}
		_ = c.Close()
		for range 1000 { // its slot is free before the next connects
			if p.openClients() == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if refused > 0 {
		t.Fatalf("%d of %d connections within the bound had a request refused", refused, n)
	}
}
