//go:build unix && !aix

package sdk

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

// A write sent on a pooled connection its server closed meanwhile (an idle
// timeout here; a restarted lockd in life) never left the client: it must
// be resent on a fresh connection and applied once, not come back
// outcome-unknown. The fake closes idle connections after 10 ms; the
// client would keep them 100 ms (TestMain), so each round's Put finds its
// pooled connection closed by the server.
func TestStalePooledConnectionResends(t *testing.T) {
	fc := startFakeCell(t, fake.Options{Replicas: 1, IdleTimeout: 10 * time.Millisecond})
	var mu sync.Mutex
	var socks []syscall.RawConn
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err == nil {
			raw, rerr := nc.(*net.TCPConn).SyscallConn()
			if rerr != nil {
				t.Errorf("SyscallConn: %v", rerr)
			}
			mu.Lock()
			socks = append(socks, raw)
			mu.Unlock()
		}
		return nc, err
	}
	c := newTestClient(t, fc, func(cfg *Config) { cfg.Dial = dial })
	const maxRounds, wantStale = 40, 3
	puts := 0
	for round := 0; round < maxRounds && c.bulk.stale.Load() < wantStale; round++ {
		// Wait (bounded) until the server has closed every connection
		// the client holds: the next Put's pooled one is stale.
		for i := 0; i < 200 && !allGone(&mu, &socks); i++ {
			time.Sleep(time.Millisecond)
		}
		n, err := c.Put(testCtx(t), "/demo/n", []byte(fmt.Sprint(round)))
		if err != nil {
			t.Fatalf("round %d: a write on a connection the server had closed: %v", round, err)
		}
		puts++
		if n.Version != uint64(puts) {
			t.Fatalf("round %d: version %d, want %d (each put applied once)", round, n.Version, puts)
		}
	}
	if got := c.bulk.stale.Load(); got < wantStale {
		t.Fatalf("only %d of %d puts found their pooled connection closed (the client's idle timeout beat the server's): the test proved nothing", got, puts)
	}
	if got := len(fc.requests(api.RoutePut)); got != puts {
		t.Fatalf("the cell saw %d puts, want %d", got, puts)
	}
}

// allGone reports whether the peer of every socket has closed it.
func allGone(mu *sync.Mutex, socks *[]syscall.RawConn) bool {
	mu.Lock()
	defer mu.Unlock()
	for _, s := range *socks {
		if !peerGone(s) {
			return false
		}
	}
	return true
}

// A pooled connection the server keeps open is not stale, however long it
// was idle: in particular past the read deadline its last request left on
// it (fasthttp leaves it set; here it is moved into the past by hand),
// which a peek through RawConn.Read would take for a closed connection,
// sending every such request on a detour of a backoff and another
// endpoint.
func TestLivePooledConnectionIsNotStale(t *testing.T) {
	fc := startFakeCell(t, fake.Options{Replicas: 1, IdleTimeout: time.Minute})
	var mu sync.Mutex
	var conns []*net.TCPConn
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, nc.(*net.TCPConn))
			mu.Unlock()
		}
		return nc, err
	}
	c := newTestClient(t, fc, func(cfg *Config) { cfg.Dial = dial })
	for i := range 3 {
		if _, err := c.Put(testCtx(t), "/demo/n", []byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		mu.Lock()
		for _, nc := range conns {
			_ = nc.SetReadDeadline(time.Now().Add(-time.Second))
		}
		mu.Unlock()
	}
	if got := c.bulk.stale.Load(); got != 0 {
		t.Fatalf("%d requests found a live pooled connection stale", got)
	}
}
