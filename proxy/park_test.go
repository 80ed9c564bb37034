package proxy

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/tlsutil"
)

// kaConn is a client connection to the proxy with a KeepAlive sent on
// it.
type kaConn struct {
	c  net.Conn
	br *bufio.Reader
}

// sendKeepAlive sends a KeepAlive of session s waiting wait, on a
// connection of its own (over TLS with cfg).
func sendKeepAlive(t *testing.T, p *Proxy, cfg *tls.Config, s api.SessionResponse, wait time.Duration) kaConn {
	t.Helper()
	body, _ := json.Marshal(api.KeepAliveRequest{Cell: "demo", Session: s.Session, Secret: s.Secret, WaitMS: wait.Milliseconds()})
	return post(t, p, cfg, api.RouteSessionKeepAlive, body)
}

// post sends a request to route on a connection of its own.
func post(t *testing.T, p *Proxy, cfg *tls.Config, route string, body []byte) kaConn {
	t.Helper()
	return send(t, dial(t, p, cfg), route, body)
}

// dial opens a client connection to p (over TLS with cfg), closed when
// the test ends.
func dial(t *testing.T, p *Proxy, cfg *tls.Config) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if cfg != nil {
		c, err = tls.Dial("tcp", p.Addr(), cfg)
	} else {
		c, err = net.Dial("tcp", p.Addr())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func send(t *testing.T, c net.Conn, route string, body []byte) kaConn {
	t.Helper()
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: p\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", route, len(body), body)
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	return kaConn{c: c, br: bufio.NewReader(c)}
}

// answer reads the KeepAlive's answer, waiting at most within.
func (k kaConn) answer(within time.Duration) (api.SessionResponse, error) {
	_ = k.c.SetReadDeadline(time.Now().Add(within))
	var resp fasthttp.Response
	if err := resp.Read(k.br); err != nil {
		return api.SessionResponse{}, err
	}
	var s api.SessionResponse
	if resp.StatusCode() != fasthttp.StatusOK {
		return s, fmt.Errorf("%d %s", resp.StatusCode(), resp.Body())
	}
	return s, json.Unmarshal(resp.Body(), &s)
}

// awaitParked waits (at most maxParkLooks × 20 ms) for n KeepAlives
// parked at p.
func awaitParked(t *testing.T, p *Proxy, n int) {
	t.Helper()
	const maxParkLooks = 500
	for range maxParkLooks {
		if p.parkedKeepAlives() == n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d KeepAlives parked, want %d", p.parkedKeepAlives(), n)
}

// TestHeldKeepAlivesParked: clients' KeepAlives the proxy holds are parked
// (lockproxy_parked_keepalives: their handlers returned), answered on
// their connections when their wait ends, which are then served again; a
// held one is answered as soon as a newer KeepAlive of its session
// supersedes it, not when its wait ends (mutant
// lockproxy_broken_ka_nowake); the proxy's Close closes the connections
// of those still held. Plain and over mutual TLS.
func TestHeldKeepAlivesParked(t *testing.T) {
	plainAndTLS(t, heldKeepAlivesParked)
}

// plainAndTLS runs f twice, as subtests: on a proxy config without TLS
// (ccfg nil), then on one over mutual TLS with ccfg a client's
// certificate from the same development CA.
func plainAndTLS(t *testing.T, f func(t *testing.T, cfg Config, ccfg *tls.Config)) {
	node, client, err := tlsutil.DevCA(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "mutual TLS"}[tlsOn], func(t *testing.T) {
			cfg, ccfg := Config{}, (*tls.Config)(nil)
			if tlsOn {
				if cfg.TLS, err = node.Server(); err != nil {
					t.Fatal(err)
				}
				if ccfg, err = client.Client(); err != nil {
					t.Fatal(err)
				}
			}
			f(t, cfg, ccfg)
		})
	}
}

func heldKeepAlivesParked(t *testing.T, cfg Config, ccfg *tls.Config) {
	cfg.ParkKeepAlives = true
	fc, p := startOnFake(t, cfg)
	answerBatches(fc)
	const n = 20
	sessions := make([]api.SessionResponse, n)
	for i := range sessions {
		open, _ := json.Marshal(api.OpenSessionRequest{Cell: "demo", LeaseMS: 60_000})
		k := post(t, p, ccfg, api.RouteSessionOpen, open)
		var err error
		if sessions[i], err = k.answer(10 * time.Second); err != nil {
			t.Fatalf("open: %v", err)
		}
		// Its first KeepAlive here waits for the batch that confirms it.
		if _, err := sendKeepAlive(t, p, ccfg, sessions[i], 0).answer(10 * time.Second); err != nil {
			t.Fatalf("session %d's first KeepAlive: %v", sessions[i].Session, err)
		}
	}
	awaitParked(t, p, 0)

	// Held for their wait (the lease's half at most: 30 s).
	held := make([]kaConn, n)
	for i, s := range sessions {
		held[i] = sendKeepAlive(t, p, ccfg, s, api.MaxKeepAliveWait)
	}
	awaitParked(t, p, n)

	// A newer KeepAlive answers the one held, long before its wait ends.
	short := sendKeepAlive(t, p, ccfg, sessions[0], 300*time.Millisecond)
	got, err := held[0].answer(10 * time.Second)
	if err != nil || got.Session != sessions[0].Session {
		t.Fatalf("a held KeepAlive superseded by a newer one: %+v, %v; want its session's answer at once", got, err)
	}
	// The newer one is answered when its wait ends, and its connection
	// is served again.
	if got, err := short.answer(10 * time.Second); err != nil || got.Session != sessions[0].Session {
		t.Fatalf("a KeepAlive whose wait ended: %+v, %v", got, err)
	}
	if _, err := short.c.Write([]byte("GET /v1/status HTTP/1.1\r\nHost: p\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	var st fasthttp.Response
	_ = short.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := st.Read(short.br); err != nil || st.StatusCode() != fasthttp.StatusOK {
		t.Fatalf("the connection after a parked KeepAlive's answer: %v %d", err, st.StatusCode())
	}
	awaitParked(t, p, n-1)

	_ = p.Close()
	for _, k := range held[1:] {
		_, err := k.answer(10 * time.Second)
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a parked KeepAlive after the proxy's Close: %v, want its connection closed", err)
		}
	}
	if k := p.parkedKeepAlives(); k != 0 {
		t.Fatalf("%d KeepAlives still parked after Close", k)
	}
}

// TestParkedMaxCoversEveryHold: no hold the table keeps (its wait, and a
// session waiting for its batch past it, at every lease) outlasts the
// safety net that closes a parked KeepAlive's connection unanswered.
func TestParkedMaxCoversEveryHold(t *testing.T) {
	arrived := time.Unix(1_000, 0)
	for _, lease := range []time.Duration{api.MinLease, api.DefaultLease, time.Minute, api.MaxLease} {
		clk := newKAClock(arrived, api.MaxKeepAliveWait.Milliseconds(), lease)
		for _, awaits := range []bool{false, true} {
			if held := clk.holdUntil(awaits).Sub(arrived); held >= kaParkedMax {
				t.Errorf("lease %v: a hold of %v (awaiting a batch: %v), past kaParkedMax %v", lease, held, awaits, kaParkedMax)
			}
		}
	}
}
