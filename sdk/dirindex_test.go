package sdk

import (
	"errors"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

// TestCellCallsSayTheirDirectoryIndex: a call routed to a cell tells the
// lockd the directory index it was routed by (api.HeaderDirectoryIndex),
// so that a lockd whose view lacks a cell just created answers "send
// again" rather than wrong_cell. A lockproxy's Forward tells the later of
// its own view's and its client's, and itself refuses a cell its view
// lacks unavailable, not applied, while its client has seen a later
// directory (wrong_cell otherwise).
func TestCellCallsSayTheirDirectoryIndex(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := startFakeCell(t, fake.Options{Replicas: 1, Memory: true, Prefixes: []string{"/demo"}})
		serveDirectory(fc, dirAt(fc, 7, "/demo"))
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		lastPut := func() string {
			reqs := fc.requests(api.RoutePut)
			if len(reqs) == 0 {
				t.Fatal("no put reached the cell")
			}
			return reqs[len(reqs)-1].dirIdx
		}
		if _, err := c.Put(ctx, "/demo/a", []byte("1")); err != nil {
			t.Fatal(err)
		}
		if got := lastPut(); got != "7" {
			t.Fatalf("a put said directory index %q, want 7", got)
		}
		body := mustMarshal(api.PutRequest{Path: "/demo/b", Value: []byte("2")})
		for _, tc := range []struct {
			client uint64
			want   string
		}{{9, "9"}, {3, "7"}, {0, "7"}} {
			if _, err := c.Forward(ctx, fc.Name(), api.RoutePut, body, ForwardOptions{DirectoryIndex: tc.client}); err != nil {
				t.Fatal(err)
			}
			if got := lastPut(); got != tc.want {
				t.Fatalf("a forward for a client at index %d said %q, want %s", tc.client, got, tc.want)
			}
		}
		for _, tc := range []struct {
			client     uint64
			code       api.Code
			notApplied bool
		}{{9, api.CodeUnavailable, true}, {7, api.CodeWrongCell, false}, {0, api.CodeWrongCell, false}} {
			_, err := c.Forward(ctx, "fresh1", api.RoutePut, body, ForwardOptions{DirectoryIndex: tc.client})
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != tc.code || ae.NotApplied != tc.notApplied {
				t.Fatalf("a forward to a cell the view lacks, for a client at index %d: %v; want %s (not_applied %v)", tc.client, err, tc.code, tc.notApplied)
			}
		}
	})
}

// TestLaggingReplicaIsPassedOver: a lockd whose directory view lags
// answers unavailable, not applied, for as long as it lags; it names no
// leader, so the call looks at another replica after notAppliedRotate of
// them instead of asking it again until its deadline (the attack on the
// view-behind answer: 31 attempts to the one replica, none elsewhere).
func TestLaggingReplicaIsPassedOver(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := startFakeCell(t, fake.Options{Replicas: 3, Memory: true, Prefixes: []string{"/demo"}})
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		if _, err := c.Put(ctx, "/demo/a", []byte("1")); err != nil {
			t.Fatal(err)
		}
		fc.failover(2)
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if rep == 0 && route == api.RoutePut {
				e := api.ViewBehindError("lockd", "cell "+fc.Name(), 3, 7)
				return e.Code.HTTPStatus(), e
			}
			return next()
		})
		if _, err := c.Put(ctx, "/demo/b", []byte("2")); err != nil {
			t.Fatalf("put while the replica first asked lags: %v", err)
		}
		lagged := 0
		for _, r := range fc.requests(api.RoutePut) {
			if r.replica == 0 {
				lagged++
			}
		}
		if lagged > notAppliedRotate+1 { // +1: the first put
			t.Fatalf("%d puts to the lagging replica, want at most %d", lagged, notAppliedRotate+1)
		}
	})
}
