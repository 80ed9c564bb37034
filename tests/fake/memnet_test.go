package fake

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// TestMemoryNetwork: a Memory cell serves over Dial inside a synctest
// bubble; an address it does not have, and any address once closed, is
// refused as TCP refuses (syscall.ECONNREFUSED).
func TestMemoryNetwork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New(Options{Replicas: 2, Memory: true})
		if err != nil {
			t.Fatal(err)
		}
		hc := &fasthttp.HostClient{Addr: c.Addr(1), MaxIdleConnDuration: 100 * time.Millisecond,
			Dial: func(addr string) (net.Conn, error) { return c.Dial(context.Background(), "tcp", addr) }}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://" + c.Addr(1) + api.RouteStatus)
		if err := hc.DoTimeout(req, resp, time.Second); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("status over the memory network: %v %d", err, resp.StatusCode())
		}
		if _, err := c.Dial(context.Background(), "tcp", "127.0.0.1:1"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial of an unknown address: %v", err)
		}
		hc.CloseIdleConnections()
		c.Close()
		if _, err := c.Dial(context.Background(), "tcp", c.Addr(0)); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial after Close: %v", err)
		}
		time.Sleep(time.Second) // fasthttp's janitors end their last round
	})
}
