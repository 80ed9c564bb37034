package proxy

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

// answerBatches makes the fake answer a lockproxy's batches as a lockd
// does (renewing every session; one older than the binary encoding reads
// every body as JSON: fake.Options.NoWire).
func answerBatches(fc *fake.Cell) {
	fc.SetHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		if route != api.RouteKeepAliveBatch {
			return next()
		}
		var req api.KeepAliveBatchRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return fake.Fail(api.CodeBadRequest, "malformed JSON body: %v", err)
		}
		return fasthttp.StatusOK, api.KeepAliveBatchResponse{Epoch: req.Epoch, Index: 1}
	})
}

// awaitBatches waits (at most maxBatchLooks × 50 ms) for n batches to
// reach the cell, and returns those it got.
func awaitBatches(fc *fake.Cell, n int) []fake.Request {
	const maxBatchLooks = 200
	for range maxBatchLooks {
		if b := fc.Requests(api.RouteKeepAliveBatch); len(b) >= n {
			return b
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fc.Requests(api.RouteKeepAliveBatch)
}

// postTo sends one request to the proxy; it returns the status, content
// type and body.
func postTo(t *testing.T, p *Proxy, route, ctype string, body []byte) (int, string, []byte) {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + p.Addr() + route)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType(ctype)
	req.SetBody(body)
	if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode(), string(resp.Header.ContentType()), append([]byte(nil), resp.Body()...)
}

// TestKeepAliveWireThroughProxy: a client's binary KeepAlive is answered
// in binary with what a JSON one gets; the proxy's batches go in binary,
// and to a lockd older than the encoding in JSON after its one refusal.
func TestKeepAliveWireThroughProxy(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(map[bool]string{false: "lockd takes binary", true: "lockd older than binary"}[old], func(t *testing.T) {
			fc, err := fake.New(fake.Options{Name: "demo", NoWire: old})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(fc.Close)
			answerBatches(fc)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := Start(ctx, Config{Name: "p1", Listen: "127.0.0.1:0", Lockds: fc.Endpoints()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })

			open, _ := json.Marshal(api.OpenSessionRequest{Cell: "demo"})
			status, _, body := postTo(t, p, api.RouteSessionOpen, "application/json", open)
			var s api.SessionResponse
			if status != 200 || json.Unmarshal(body, &s) != nil {
				t.Fatalf("open: %d %s", status, body)
			}
			ka := api.KeepAliveRequest{Cell: "demo", Session: s.Session, Secret: s.Secret}
			status, ctype, body := postTo(t, p, api.RouteSessionKeepAlive, api.ContentTypeWire, ka.AppendWire(nil))
			var bin api.SessionResponse
			if status != 200 || ctype != api.ContentTypeWire {
				t.Fatalf("binary KeepAlive: %d %s %q", status, ctype, body)
			}
			if err := bin.UnmarshalWire(body); err != nil {
				t.Fatal(err)
			}
			jka, _ := json.Marshal(ka)
			status, ctype, body = postTo(t, p, api.RouteSessionKeepAlive, "application/json", jka)
			var js api.SessionResponse
			if status != 200 || ctype != "application/json" || json.Unmarshal(body, &js) != nil {
				t.Fatalf("JSON KeepAlive: %d %s %q", status, ctype, body)
			}
			if bin.Session != js.Session || bin.LeaseMS != js.LeaseMS || bin.Epoch != js.Epoch || bin.Proxy != js.Proxy || bin.Proxy == "" {
				t.Fatalf("binary reply %+v, JSON reply %+v", bin, js)
			}
			status, ctype, _ = postTo(t, p, api.RouteSessionKeepAlive, api.ContentTypeWire, ka.AppendWire(nil)[:5])
			if status != 400 || ctype != "application/json" {
				t.Fatalf("truncated binary KeepAlive: %d %s, want 400 in JSON", status, ctype)
			}

			batches := awaitBatches(fc, 2)
			wire := 0
			for _, r := range batches {
				if r.Wire {
					wire++
				}
			}
			switch {
			case len(batches) < 2:
				t.Fatalf("%d batches reached the cell, want 2", len(batches))
			case !old && wire != len(batches):
				t.Fatalf("%d of %d batches in binary", wire, len(batches))
			case old && (wire != 1 || !batches[0].Wire):
				t.Fatalf("to an old lockd: %d of %d batches in binary, want the first only", wire, len(batches))
			}
		})
	}
}
