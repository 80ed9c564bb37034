package proxy

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
)

// sharedTable is a table whose own session may serve its cache for 8 s,
// with client 1 confirmed through it.
func sharedTable() (*cellTable, *proxySession) {
	tb := testTable()
	tb.sharedCache = func(string) (uint64, time.Duration) { return 77, 8 * time.Second }
	now := time.Now()
	tb.lastOK, tb.lastReply, tb.epoch = now, now, 3
	ps := newProxySession(1)
	ps.lease, ps.lastKA, ps.base, ps.ack, ps.knowsMe = 12*time.Second, now, now, ack{3, 0}, true
	ps.secret = "s1"
	tb.sessions[1] = ps
	return tb, ps
}

func keepAliveNow(t *testing.T, tb *cellTable, req api.KeepAliveRequest) api.SessionResponse {
	t.Helper()
	req.Cell, req.Session, req.Secret = "demo", 1, "s1"
	resp, err := tb.keepAlive(context.Background(), req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestFailOverInvalidatesEveryCachedValue: when the proxy's own session
// sees a new leader, every value it served as cacheable is invalidated at
// its clients before the proxy acknowledges the new epoch (a client may
// have learned of the leader first and cached a value under it).
func TestFailOverInvalidatesEveryCachedValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, ps := sharedTable()
		keepAliveNow(t, tb, api.KeepAliveRequest{}) // a grant
		tb.mu.Lock()
		for _, p := range []string{"/demo/a", "/demo/b"} {
			tb.cachers[p] = map[uint64]struct{}{1: {}}
			ps.cached[p] = struct{}{}
		}
		tb.mu.Unlock()
		ch := tb.failedOver(4)
		if ch == nil {
			t.Fatal("no wait for the client holding cached values")
		}
		resp := keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance})
		if len(resp.ProxyEvents) != 2 {
			t.Fatalf("proxy events %+v: want both paths invalidated", resp.ProxyEvents)
		}
		keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance, ProxyAck: resp.ProxyEvents[1].Seq})
		synctest.Wait()
		select {
		case <-ch:
		default:
			t.Fatal("the client's acknowledgement did not release the new epoch")
		}
		if ch := tb.failedOver(5); ch != nil {
			t.Fatal("nothing cached: nothing to wait for")
		}
	})
}

// TestInvalidationWaitsForTheClient: the proxy's acknowledgement of an
// invalidation waits for each client it served the path to; the client
// gets it as a proxy event, and its acknowledgement releases the wait.
func TestInvalidationWaitsForTheClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, ps := sharedTable()
		keepAliveNow(t, tb, api.KeepAliveRequest{}) // a grant
		tb.mu.Lock()
		tb.cachers["/demo/x"] = map[uint64]struct{}{1: {}}
		ps.cached["/demo/x"] = struct{}{}
		tb.mu.Unlock()

		if ch := tb.invalidate([]string{"/demo/other"}, false); ch != nil {
			t.Fatal("nobody caches /demo/other: nothing to wait for")
		}
		ch := tb.invalidate([]string{"/demo/x"}, false)
		if ch == nil {
			t.Fatal("no wait for the client that caches /demo/x")
		}
		resp := keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance})
		if len(resp.ProxyEvents) != 1 || resp.ProxyEvents[0].Type != api.EventInvalidate || resp.ProxyEvents[0].Path != "/demo/x" {
			t.Fatalf("proxy events %+v: want the invalidation of /demo/x", resp.ProxyEvents)
		}
		synctest.Wait()
		select {
		case <-ch:
			t.Fatal("the proxy acknowledged before its client did")
		default:
		}
		keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance, ProxyAck: resp.ProxyEvents[0].Seq})
		synctest.Wait()
		select {
		case <-ch:
		default:
			t.Fatal("the client's acknowledgement did not release the proxy's")
		}
		if len(tb.cachers) != 0 || len(ps.cached) != 0 {
			t.Fatalf("the invalidated client is still a cacher: %v %v", tb.cachers, ps.cached)
		}
	})
}

// TestInvalidationOfASilentClientEndsWithItsGrant: a client that never
// acknowledges holds the proxy's acknowledgement only until its grant
// runs out (on the synctest bubble's clock: 10 s is a bound, not a wait).
func TestInvalidationOfASilentClientEndsWithItsGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, ps := sharedTable()
		tb.mu.Lock()
		ps.grantUntil = time.Now().Add(100 * time.Millisecond)
		tb.cachers["/demo/x"] = map[uint64]struct{}{1: {}}
		tb.mu.Unlock()
		ch := tb.invalidate([]string{"/demo/x"}, false)
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("a silent client holds the proxy's acknowledgement past its grant")
		}
	})
}

// TestNewOwnSessionInvalidatesFirst: when the proxy's own session ended
// and another replaced it, the leader no longer invalidates what the old
// one cached, so the grant counted from the new one comes with the
// invalidation of everything served before.
func TestNewOwnSessionInvalidatesFirst(t *testing.T) {
	tb, ps := sharedTable()
	keepAliveNow(t, tb, api.KeepAliveRequest{})
	tb.mu.Lock()
	tb.cachers["/demo/a"] = map[uint64]struct{}{1: {}}
	ps.cached["/demo/a"] = struct{}{}
	tb.mu.Unlock()
	if resp := keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance}); len(resp.ProxyEvents) != 0 {
		t.Fatalf("events %+v with the same own session", resp.ProxyEvents)
	}
	tb.sharedCache = func(string) (uint64, time.Duration) { return 78, 8 * time.Second }
	resp := keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance})
	if resp.CacheMS <= 0 || len(resp.ProxyEvents) != 1 || resp.ProxyEvents[0].Path != "/demo/a" {
		t.Fatalf("reply %+v: want the grant with the invalidation of /demo/a", resp)
	}
}

// TestOlderClientsAreForwarded: a client whose KeepAlives never named
// this proxy instance (an older SDK) gets no shared cache or watches.
func TestOlderClientsAreForwarded(t *testing.T) {
	tb, ps := sharedTable()
	ps.knowsMe = false
	if tb.isLiveClient(1, "s1") {
		t.Fatal("a client that never named the proxy is served from its shared cache")
	}
	keepAliveNow(t, tb, api.KeepAliveRequest{Proxy: tb.instance})
	if !tb.isLiveClient(1, "s1") {
		t.Fatal("a client that named the proxy is not")
	}
}

// TestReadsJoinOnlyAFlightNotYetSent: a read arriving while one is under
// way must not take its result (it may predate a write that completed
// before the read came): it joins, or forms, the next one.
func TestReadsJoinOnlyAFlightNotYetSent(t *testing.T) {
	tb := testTable()
	first, lead := tb.joinFlight("/demo/x")
	if !lead || first.prev != nil {
		t.Fatal("the first read leads a flight of its own")
	}
	second, lead := tb.joinFlight("/demo/x")
	if !lead || second == first || second.prev != first {
		t.Fatal("a read while one is under way forms the next flight")
	}
	third, lead := tb.joinFlight("/demo/x")
	if lead || third != second {
		t.Fatal("a later read joins the next flight, not the one under way")
	}
	if other, lead := tb.joinFlight("/demo/y"); !lead || other == first || other == second {
		t.Fatal("another path flies on its own")
	}
}

// TestClientSecretAtTheProxy: a KeepAlive or shared read without the
// secret the cell confirmed is refused or forwarded, a close with a wrong
// one changes nothing, and a session the proxy has no entry for is not
// renewed by a KeepAlive (only adopt, after the leader accepted one,
// makes an entry).
func TestClientSecretAtTheProxy(t *testing.T) {
	tb, _ := sharedTable()
	if tb.isLiveClient(1, "guess") {
		t.Fatal("a shared read with a wrong secret is served")
	}
	if _, err := tb.keepAlive(context.Background(), api.KeepAliveRequest{Cell: "demo", Session: 1, Secret: "guess"}, time.Now()); api.CodeOf(err) != api.CodeUnauthorized {
		t.Fatalf("keepalive with a wrong secret: %v, want unauthorized", err)
	}
	tb.closed(1, "guess")
	if tb.sessions[1] == nil || tb.sessions[1].err != nil {
		t.Fatal("a close with a wrong secret ended the session at the proxy")
	}
	if _, err := tb.keepAlive(context.Background(), api.KeepAliveRequest{Cell: "demo", Session: 2, Secret: "guess"}, time.Now()); err == nil || tb.sessions[2] != nil {
		t.Fatalf("a keepalive for a session unknown here: %v, entry %v", err, tb.sessions[2])
	}
}
