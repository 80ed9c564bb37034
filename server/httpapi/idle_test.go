package httpapi

import (
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/internal/connpark"
	"github.com/lockservice/lockd/internal/tlsutil"
)

// idleServer serves s's handler as lockd does (hijacked connections kept,
// bodies streamed, buffers given back), with idle connections parked and
// closed after timeout; over TLS when cfg is set.
func idleServer(t *testing.T, s *Server, timeout time.Duration, cfg *tls.Config) string {
	t.Helper()
	srv := &fasthttp.Server{Handler: s.Handler, ReduceMemoryUsage: true, KeepHijackedConns: true, StreamRequestBody: true,
		IdleTimeout: timeout, MaxIdleWorkerDuration: 10 * time.Millisecond}
	s.ServeConns(srv.ServeConn)
	if err := s.ParkIdleConns(timeout); err != nil {
		t.Fatal(err)
	}
	return serveOn(t, s, srv, cfg)
}

// awaitHeld waits until the idle poller holds n connections.
func awaitHeld(t *testing.T, s *Server, n int) {
	t.Helper()
	for range 500 {
		if s.parks.IdleHeld() == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the idle poller holds %d connections, want %d", s.parks.IdleHeld(), n)
}

const statusReq = "GET /v1/status HTTP/1.1\r\nHost: lockd\r\nAuthorization: Bearer " + wireTestAdmin + "\r\n\r\n"

// TestIdleParkedConnections: a connection idle after its answer is held
// by the poller and served again when its client speaks (plain and over
// TLS, the client certificate still seen; requests pipelined behind an
// answer served at once); one whose request body was left unread is not
// parked (the body is not taken for a request); one idle past the
// timeout is closed; and the server's Close closes what it holds.
func TestIdleParkedConnections(t *testing.T) {
	node, client, err := tlsutil.DevCA(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	dial := func(t *testing.T, addr string, tlsOn bool) net.Conn {
		t.Helper()
		var c net.Conn
		var err error
		if tlsOn {
			cfg, cerr := client.Client()
			if cerr != nil {
				t.Fatal(cerr)
			}
			c, err = tls.Dial("tcp", addr, cfg)
		} else {
			c, err = net.Dial("tcp", addr)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	for _, tlsOn := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "tls"}[tlsOn]
		t.Run(name, func(t *testing.T) {
			s := wireTestServer(t)
			var cfg *tls.Config
			if tlsOn {
				if cfg, err = node.Server(); err != nil {
					t.Fatal(err)
				}
				s.RequireClientCerts()
			}
			addr := idleServer(t, s, time.Minute, cfg)
			c := dial(t, addr, tlsOn)
			write(t, c, healthReq)
			if got := readAnswers(t, c, 1); got[0] != "ok\n" {
				t.Fatalf("first answer %q", got)
			}
			awaitHeld(t, s, 1) // a new connection, after its first request
			for round := range 2 {
				// Pipelined: the second is answered at once, and the
				// connection, busy, stays with fasthttp after both.
				parks := s.parks.IdleParks()
				write(t, c, healthReq+statusReq)
				got := readAnswers(t, c, 2)
				if got[0] != "ok\n" || !strings.Contains(got[1], "{") || strings.Contains(got[1], "client certificate") {
					t.Fatalf("round %d: pipelined answers %q", round, got)
				}
				time.Sleep(50 * time.Millisecond)
				if n := s.parks.IdleParks() - parks; n != 0 {
					t.Fatalf("round %d: a pipelining client was parked %d times", round, n)
				}
				// Its third request comes after a pause of
				// connpark.IdleGap: parked again after it.
				time.Sleep(connpark.IdleGap + 200*time.Millisecond)
				write(t, c, healthReq)
				if got := readAnswers(t, c, 1); got[0] != "ok\n" {
					t.Fatalf("round %d: %q", round, got)
				}
				awaitHeld(t, s, 1)
			}
		})
	}

	t.Run("unread body", func(t *testing.T) {
		s := wireTestServer(t)
		addr := idleServer(t, s, time.Minute, nil)
		c := dial(t, addr, false)
		// A route that answers without reading the body, whose end (past
		// what fasthttp reads ahead) is a request: it must be discarded
		// with the body, never answered.
		body := strings.Repeat("x", 8<<10) + healthReq
		write(t, c, "POST /no/such/route HTTP/1.1\r\nHost: lockd\r\nAuthorization: Bearer "+wireTestAdmin+"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		if got := readAnswers(t, c, 1); !strings.Contains(got[0], "no route") {
			t.Fatalf("answer %q, want no route", got)
		}
		time.Sleep(100 * time.Millisecond)
		write(t, c, statusReq)
		if got := readAnswers(t, c, 1); !strings.Contains(got[0], "{") {
			t.Fatalf("the next request's answer is %q: the unread body was taken for a request", got)
		}
	})

	t.Run("idle timeout", func(t *testing.T) {
		s := wireTestServer(t)
		addr := idleServer(t, s, 200*time.Millisecond, nil)
		c := dial(t, addr, false)
		write(t, c, healthReq)
		readAnswers(t, c, 1)
		awaitHeld(t, s, 1)
		if !closedWithin(c, 200*time.Millisecond+time.Second+5*time.Second) {
			t.Fatal("a connection idle past the timeout is still open")
		}
		awaitHeld(t, s, 0)
	})

	t.Run("close", func(t *testing.T) {
		s := wireTestServer(t)
		addr := idleServer(t, s, time.Minute, nil)
		c := dial(t, addr, false)
		write(t, c, healthReq)
		readAnswers(t, c, 1)
		awaitHeld(t, s, 1)
		s.Close()
		if !closedWithin(c, 5*time.Second) {
			t.Fatal("a parked idle connection outlived the server's Close")
		}
		// fasthttp serves on until its own Shutdown: a new connection's
		// pipelined requests are all answered, none parked or dropped.
		c2 := dial(t, addr, false)
		write(t, c2, healthReq+healthReq)
		if got := readAnswers(t, c2, 2); got[0] != "ok\n" || got[1] != "ok\n" {
			t.Fatalf("after Close: %q", got)
		}
		if n := s.parks.IdleHeld(); n != 0 || s.parks.IdleParking() {
			t.Fatalf("the poller holds %d connections after Close", n)
		}
	})
}

// TestBusyConnectionStaysWithFasthttp: requests back to back on one
// connection park it once, after the first (a new connection), and not
// again (a stall of a second on a loaded machine may park it once more):
// a busy connection pays no hand-over per request.
func TestBusyConnectionStaysWithFasthttp(t *testing.T) {
	s := wireTestServer(t)
	addr := idleServer(t, s, time.Minute, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 500
	for range n {
		write(t, c, healthReq)
		readAnswers(t, c, 1)
	}
	if got := s.parks.IdleParks(); got < 1 || got > 3 {
		t.Fatalf("%d requests back to back parked the connection %d times, want 1 (or a few)", n, got)
	}
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.ReadAll(c)
	return err == nil // EOF: closed by the server; a timeout is an error
}

// parkedConns is how many idle connections TestIdleParkedConnCost holds.
const parkedConns = 1000

// maxParkedConnBytes bounds a parked idle connection's cost as measured
// by TestIdleParkedConnCost (both ends); one held by fasthttp costs about
// 11.7 KB (server/lockd TestIdleConnCost), the target is 8 KB.
const maxParkedConnBytes = 4 << 10

// TestIdleParkedConnCost opens parkedConns keep-alive connections to a
// server as lockd's, one request on each, and reports what they hold once
// parked: heap and goroutine stacks per connection, both ends (the
// client's sockets too: an upper bound). None holds a goroutine.
func TestIdleParkedConnCost(t *testing.T) {
	if testing.Short() {
		t.Skip("holds a thousand connections")
	}
	s := wireTestServer(t)
	addr := idleServer(t, s, time.Minute, nil)
	heap0, stacks0 := inuse()
	goroutines0 := runtime.NumGoroutine()
	conns := make([]net.Conn, 0, parkedConns)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range parkedConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		write(t, c, healthReq)
		readAnswers(t, c, 1)
	}
	awaitHeld(t, s, parkedConns)
	time.Sleep(100 * time.Millisecond) // fasthttp's idle workers end (MaxIdleWorkerDuration)
	heap, stacks := inuse()
	// fasthttp's few idle workers have ended by now; a goroutine per
	// connection would add parkedConns.
	if g := runtime.NumGoroutine() - goroutines0; g > parkedConns/10 {
		t.Errorf("%d goroutines more for %d parked connections", g, parkedConns)
	}
	per := (heap - heap0 + stacks - stacks0) / parkedConns
	t.Logf("%d parked idle connections: %d B each (heap %d + stacks %d; both ends)", parkedConns, per, (heap-heap0)/parkedConns, (stacks-stacks0)/parkedConns)
	if per > maxParkedConnBytes && !raceEnabled {
		t.Errorf("a parked idle connection costs %d B, bound %d", per, maxParkedConnBytes)
	}
}

// inuse is the heap and the goroutine stacks in use after a collection.
func inuse() (heap, stacks int64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse), int64(m.StackInuse)
}
