package proxy

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestCloseBoundedBySilentClients: a proxy's Close ends within its grace
// however its clients behave: a TLS client that connected and never sent
// its ClientHello (fasthttp's handshake waits for it up to ReadTimeout,
// 40 s) and a plain client silent since its answer. Close then closes
// their connections (mutant lockproxy_broken_close_unbounded: Close
// waits for them).
func TestCloseBoundedBySilentClients(t *testing.T) {
	plainAndTLS(t, func(t *testing.T, cfg Config, ccfg *tls.Config) {
		_, p := startOnFake(t, cfg)
		p.closeGrace = 200 * time.Millisecond
		// A client answered once, silent since.
		k := post(t, p, ccfg, "/v1/status", nil)
		_ = k.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var resp fasthttp.Response
		if err := resp.Read(k.br); err != nil || resp.StatusCode() != fasthttp.StatusOK {
			t.Fatalf("status: %v %d", err, resp.StatusCode())
		}
		// A client that never speaks: no request, no ClientHello.
		silent, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		time.Sleep(100 * time.Millisecond) // accepted and in fasthttp's hands
		closed := make(chan error, 1)
		go func() { closed <- p.Close() }()
		// The bound is far below the 40 s a silent TLS client held
		// Close for, far above the grace.
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Close still waits for its silent clients after 20 s")
		}
		for name, c := range map[string]net.Conn{"answered": k.c, "silent": silent} {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadAll(c); err != nil { // EOF: closed
				t.Fatalf("%s client: %v; want its connection closed by Close", name, err)
			}
		}
	})
}
