package proxy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

// TestHungLeaderThroughProxy: a write through the proxy whose cell leader
// hangs (every route, /healthz too: a paused process) and is replaced a
// second later. Marked resendable (the SDK's session writes and reads),
// the proxy leaves the hung leader once it fails a health probe and
// resends the write to the new leader within the client's budget: 200.
// Not marked, the proxy never resends it (it might apply twice): the
// client gets unavailable, and the new leader never sees the write.
func TestHungLeaderThroughProxy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		resendable bool
		want       int
	}{
		{"resendable", true, 200},
		{"not resendable", false, api.CodeUnavailable.HTTPStatus()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc, p := startOnHungFake(t)
			status, body := putThrough(t, p, tc.resendable)
			if status != tc.want {
				t.Fatalf("put through the proxy, leader hung: %d %s, want %d", status, body, tc.want)
			}
			var atNew int
			for _, r := range fc.Requests(api.RoutePut) {
				if r.Replica == 1 {
					atNew++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.resendable]; atNew != want {
				t.Fatalf("the new leader got the put %d times, want %d", atNew, want)
			}
		})
	}
}

// startOnHungFake starts a proxy in front of a three-replica fake cell
// whose leader, replica 0, hangs from now on; replica 1 leads a second
// later.
func startOnHungFake(t *testing.T) (*fake.Cell, *Proxy) {
	fc, err := fake.New(fake.Options{Name: "demo", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, Config{Name: "p1", Listen: "127.0.0.1:0", Lockds: fc.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	var hung atomic.Bool
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before fc.Close: its handlers end
	fc.SetHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		if rep == 0 && hung.Load() {
			<-release
			return fake.Fail(api.CodeUnavailable, "stopped")
		}
		return next()
	})
	hung.Store(true)
	elect := time.AfterFunc(time.Second, func() { fc.Failover(1) })
	t.Cleanup(func() { elect.Stop() })
	return fc, p
}

// putThrough sends one put through the proxy as an SDK client would, with
// the SDK's attempt budget (a 2.5 s hold: 5 s), marked resendable or not.
func putThrough(t *testing.T, p *Proxy, resendable bool) (int, string) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + p.Addr() + api.RoutePut)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.Set(api.HeaderCell, "demo")
	req.Header.Set(api.HeaderWaitLeaderMS, "2500")
	if resendable {
		req.Header.Set(api.HeaderResendable, "1")
	}
	req.SetBodyString(`{"path":"/demo/hung","value":"djE="}`)
	if err := fasthttp.DoTimeout(req, resp, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode(), string(resp.Body())
}
