package lockd

import (
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestParkedConnectionsCounted: a connection the API's HTTP server hands
// over (a parked KeepAlive's, hijacked: fasthttp's Concurrency no longer
// counts it) still counts against the listener's bound until it closes,
// so parked KeepAlives cannot hold more than MaxConnectionsPerLockd
// descriptors.
func TestParkedConnectionsCounted(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const max = 4
	var held atomic.Int32
	release := make(chan struct{})
	srv := newHTTPServer(func(ctx *fasthttp.RequestCtx) {
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) {
			held.Add(1)
			go func() { <-release; _ = c.Close() }() // held, as a parked KeepAlive's
		})
	})
	ln, _ := apiListener(raw, nil, max)
	go func() { _ = srv.Serve(ln) }()
	defer func() { close(release); _ = srv.Shutdown() }()
	req := []byte("POST /v1/session/keepalive HTTP/1.1\r\nHost: lockd\r\nContent-Length: 0\r\n\r\n")
	var refused int
	for range 2 * max {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write(req)
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if b, _ := io.ReadAll(c); strings.HasPrefix(string(b), "HTTP/1.1 503") {
			refused++
		}
	}
	if n := held.Load(); n > max || refused != max {
		t.Fatalf("%d connections held open, %d refused; want at most %d held and the other %d refused", n, refused, max, max)
	}
}
