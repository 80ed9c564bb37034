package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// lossyRelay is an HTTP relay in front of every replica of a real cluster.
// It rewrites replica addresses in replies (the directory, not_leader
// hints) to its own, so a client given its addresses talks only through
// it; and it drops the first KeepAlive reply that carries a "deleted"
// event: the server has built (and, before events were acknowledged,
// dequeued) the reply, and the client never sees it, as when a reply is
// written to a connection its client already gave up on.
type lossyRelay struct {
	toRelay map[string]string // replica API address → relay address
	servers []*http.Server
	dropped atomic.Int64
	budget  atomic.Int64 // replies still to drop
}

func newLossyRelay(t *testing.T, endpoints []string) *lossyRelay {
	t.Helper()
	r := &lossyRelay{toRelay: map[string]string{}}
	r.budget.Store(1)
	var lns []net.Listener
	for _, ep := range endpoints {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		lns = append(lns, ln)
		r.toRelay[ep] = ln.Addr().String()
	}
	for i, ep := range endpoints {
		target := &url.URL{Scheme: "http", Host: ep}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.ModifyResponse = r.rewrite
		proxy.ErrorHandler = func(w http.ResponseWriter, req *http.Request, err error) {
			if err == errDropReply {
				// Close the client's connection with no reply at all.
				if hj, ok := w.(http.Hijacker); ok {
					if conn, _, herr := hj.Hijack(); herr == nil {
						_ = conn.Close()
						return
					}
				}
			}
			w.WriteHeader(http.StatusBadGateway)
		}
		srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
		r.servers = append(r.servers, srv)
		go func() { _ = srv.Serve(lns[i]) }()
	}
	t.Cleanup(func() {
		for _, s := range r.servers {
			_ = s.Close()
		}
	})
	return r
}

var errDropReply = fmt.Errorf("relay: reply dropped on purpose")

func (r *lossyRelay) endpoints() []string {
	var out []string
	for _, a := range r.toRelay {
		out = append(out, a)
	}
	return out
}

// rewrite maps replica addresses to relay addresses in a reply body, and
// drops the first KeepAlive reply carrying a deleted event.
func (r *lossyRelay) rewrite(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.Request.URL.Path == api.RouteSessionKeepAlive &&
		bytes.Contains(body, []byte(`"type":"deleted"`)) && r.budget.Add(-1) >= 0 {
		r.dropped.Add(1)
		return errDropReply
	}
	for real, relay := range r.toRelay {
		body = bytes.ReplaceAll(body, []byte(real), []byte(relay))
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// TestLostKeepAliveReply: a waiter's KeepAlive reply carrying the deleted
// event of its predecessor is lost after the cell built it; the waiter is
// still granted within a lease of the release, because the cell keeps the
// event until a later KeepAlive acknowledges it (and, as a second net, a
// waiter silent for a lease re-lists). Before events were acknowledged the
// event left the queue with the lost reply and the waiter waited forever.
func TestLostKeepAliveReply(t *testing.T) {
	const lease = 3 * time.Second
	c := cluster.Start(t, cluster.Options{Lease: lease})
	relay := newLossyRelay(t, c.Endpoints())

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const lock = "/demo/lostevent/lock"
	holder := newSDK(t, c, lease).NewMutex(lock)
	must(t, holder.Lock(ctx))

	waiterClient, err := sdk.New(ctx, sdk.Config{Endpoints: relay.endpoints(), Lease: lease})
	must(t, err)
	t.Cleanup(func() { waiterClient.Close() })
	for _, cell := range waiterClient.Directory().Cells {
		for _, ep := range cell.Endpoints {
			if relay.toRelay[ep] != "" {
				t.Fatalf("the waiter's directory names %s, not a relay: it would bypass the relay", ep)
			}
		}
	}
	waiter := waiterClient.NewMutex(lock)
	var (
		mu      sync.Mutex
		granted time.Time
	)
	done := make(chan error, 1)
	go func() {
		err := waiter.Lock(ctx)
		mu.Lock()
		granted = time.Now()
		mu.Unlock()
		done <- err
	}()
	waitChildren(t, newSDK(t, c, lease), lock, 2)

	released := time.Now()
	must(t, holder.Unlock(ctx))
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(lease + 5*time.Second):
		t.Fatalf("the waiter was not granted within %v of the release (replies dropped: %d)", lease+5*time.Second, relay.dropped.Load())
	}
	if relay.dropped.Load() == 0 {
		t.Fatal("no KeepAlive reply with the deleted event was dropped: the test proved nothing")
	}
	mu.Lock()
	took := granted.Sub(released)
	mu.Unlock()
	t.Logf("granted %v after the release, %d KeepAlive reply with the event dropped", took.Round(time.Millisecond), relay.dropped.Load())
	if api.TokenIndex(waiter.Token()) == 0 {
		t.Fatal("granted without a token")
	}
}
