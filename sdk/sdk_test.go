package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// fasthttp's idle-connection janitor sleeps this long before noticing
	// its pool is empty; keep it short so goleak sees it gone.
	idleConnTimeout = 100 * time.Millisecond
	goleak.VerifyTestMain(m, leakOpts...)
}

// leakOpts ignores the one goroutine that is the fake server's, not the
// client's: fasthttp's process-wide Date-header ticker, started once by the
// first fasthttp.Server and never stopped.
var leakOpts = []goleak.Option{goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1")}

// bubbleLeakOpts are leakOpts in a synctest bubble: they also ignore the
// bubble's own two goroutines (the one running the test waits in them).
var bubbleLeakOpts = append(slices.Clip(leakOpts),
	goleak.IgnoreTopFunction("internal/synctest.Run"),
	goleak.IgnoreTopFunction("testing/synctest.testingSynctestTest"))

const testWait = 5 * time.Second // bound on every wait in these tests

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

func newTestClient(t *testing.T, fc *fakeCell, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{Endpoints: []string{fc.addr(0)}, Lease: 3 * time.Second, RequestTimeout: 2 * time.Second, Dial: fc.Dial}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// tick is how far waitFor and pollFor move a bubble's clock between looks.
const tick = 5 * time.Millisecond

// waitFor lets the bubble run until cond holds, failing after testWait of
// the bubble's clock. Before each look it waits for every other goroutine
// to block (synctest.Wait), so what needs no time holds at the first
// look; what needs time to pass (a lease to run out) moves the clock on,
// a tick at a time. From the test's own goroutine only (synctest.Wait has
// one caller at a time): a hook uses pollFor.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		synctest.Wait()
		if cond() {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(tick)
	}
}

// pollFor is waitFor for a goroutine other than the test's (a hook): it
// looks a tick apart on the bubble's clock, without synctest.Wait.
func pollFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if !time.Now().Before(deadline) {
			t.Errorf("timed out waiting for %s", what)
			return
		}
		time.Sleep(tick)
	}
}

func recvEvent(t *testing.T, ch <-chan api.Event) api.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed without an event")
		}
		// Exactly one event, then closed.
		select {
		case ev2, ok := <-ch:
			if ok {
				t.Fatalf("second event on a one-shot watch: %+v", ev2)
			}
		case <-time.After(testWait):
			t.Fatal("watch channel not closed after its event")
		}
		return ev
	case <-time.After(testWait):
		t.Fatal("no watch event")
	}
	return api.Event{}
}

func noEvent(t *testing.T, ch <-chan api.Event, d time.Duration) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected watch event %+v", ev)
	case <-time.After(d):
	}
}

func replicasOf(reqs []fakeReq) []int {
	var out []int
	for _, r := range reqs {
		out = append(out, r.replica)
	}
	return out
}

func TestRetryFollowsLeaderHint(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		fc.SetLeader(2)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)

		n, err := c.Put(ctx, "/demo/a", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if stored, _ := fc.Node("/demo/a"); n.Version != 1 || string(stored.Value) != "x" { // a write answers without the value
			t.Fatalf("node = %+v, stored %+v", n, stored)
		}
		if got := replicasOf(fc.requests(api.RoutePut)); !slices.Equal(got, []int{0, 2}) {
			t.Fatalf("put went to replicas %v, want [0 2] (redirect by hint)", got)
		}
		// The leader is remembered.
		if _, err := c.Get(ctx, "/demo/a"); err != nil {
			t.Fatal(err)
		}
		if got := replicasOf(fc.requests(api.RouteGet)); !slices.Equal(got, []int{2}) {
			t.Fatalf("get went to replicas %v, want [2]", got)
		}
	})
}

func TestRetryRotatesWithoutHint(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		fc.SetLeader(2)
		fc.SetHint(false)
		// A dead replica first: a transport error also rotates.
		fc.SetEndpoints(append([]string{deadAddr(t)}, fc.Endpoints()...))
		c := newTestClient(t, fc, nil)
		if _, err := c.Get(testCtx(t), "/demo"); err != nil {
			t.Fatal(err)
		}
		if got := replicasOf(fc.requests(api.RouteGet)); !slices.Equal(got, []int{0, 1, 2}) {
			t.Fatalf("get went to replicas %v, want [0 1 2]", got)
		}
		// A sessionless write whose request never left (dead endpoint, or
		// not_leader) is also retried.
		fc.SetLeader(0)
		if _, err := c.Put(testCtx(t), "/demo/p", nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestUnavailableRetriesSameRequestID(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		if _, err := c.Session(ctx, fc.name); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		calls := 0
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route != api.RoutePut {
				return next()
			}
			status, resp := next() // applied ...
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 1 { // ... but the reply says the outcome is unknown
				return fail(api.CodeUnavailable, "proposal timed out")
			}
			return status, resp
		})
		n, err := c.Put(ctx, "/demo/u", []byte("v"))
		if err != nil {
			t.Fatal(err)
		}
		if n.Version != 1 {
			t.Fatalf("version %d: applied twice?", n.Version)
		}
		puts := fc.requests(api.RoutePut)
		if len(puts) != 2 {
			t.Fatalf("%d put attempts, want 2", len(puts))
		}
		h1, h2 := decode[api.PutRequest](t, puts[0].body).WriteHeader, decode[api.PutRequest](t, puts[1].body).WriteHeader
		if h1.Session == 0 || h1.Request == 0 || h1.Session != h2.Session || h1.Request != h2.Request {
			t.Fatalf("retry headers differ or lack a session: %+v then %+v", h1, h2)
		}

		// Without a session an unavailable write is not resent: the outcome is unknown.
		c2 := newTestClient(t, fc, nil)
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route == api.RoutePut {
				return fail(api.CodeUnavailable, "no quorum")
			}
			return next()
		})
		before := len(fc.requests(api.RoutePut))
		_, err = c2.Put(ctx, "/demo/u2", []byte("v"))
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want unavailable", err)
		}
		if n := len(fc.requests(api.RoutePut)) - before; n != 1 {
			t.Fatalf("sessionless unavailable write sent %d times, want 1", n)
		}
	})
}

func TestNoRetryOnNoNode(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		c := newTestClient(t, fc, nil)
		_, err := c.Get(testCtx(t), "/demo/missing")
		if !errors.Is(err, ErrNoNode) || !errors.Is(err, api.ErrNoNode) || api.CodeOf(err) != api.CodeNoNode {
			t.Fatalf("err = %v, want no_node", err)
		}
		var ae *api.Error
		if !errors.As(err, &ae) {
			t.Fatalf("err %T is not an *api.Error", err)
		}
		if n := len(fc.requests(api.RouteGet)); n != 1 {
			t.Fatalf("%d get attempts, want 1", n)
		}
		if err := c.Delete(testCtx(t), "/demo/missing"); !errors.Is(err, ErrNoNode) {
			t.Fatalf("delete err = %v", err)
		}
	})
}

func TestLocalErrorsSendNothing(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		before := len(fc.requests(""))
		if _, err := c.Get(ctx, "demo/x"); !errors.Is(err, ErrInvalidPath) {
			t.Fatalf("err = %v, want invalid_path", err)
		}
		if _, err := c.Put(ctx, "/demo/big", make([]byte, api.MaxValueSize+1)); !errors.Is(err, ErrValueTooLarge) {
			t.Fatalf("err = %v, want value_too_large", err)
		}
		if n := len(fc.requests("")) - before; n != 0 {
			t.Fatalf("%d requests sent for local errors", n)
		}
		// A cell the client's directory does not name may have been created
		// since: the directory is read once more, and nothing else is sent.
		before, dirBefore := len(fc.requests("")), len(fc.requests(api.RouteDirectory))
		if _, err := c.Session(ctx, "nope"); !errors.Is(err, ErrWrongCell) {
			t.Fatalf("err = %v, want wrong_cell", err)
		}
		if n, dir := len(fc.requests(""))-before, len(fc.requests(api.RouteDirectory))-dirBefore; n != 1 || dir != 1 {
			t.Fatalf("%d requests (%d directory reads) sent for a session on an unknown cell, want one directory read", n, dir)
		}
		// So may a prefix it does not map (assigned since).
		before, dirBefore = len(fc.requests("")), len(fc.requests(api.RouteDirectory))
		if _, err := c.Get(ctx, "/elsewhere/x"); !errors.Is(err, ErrWrongCell) {
			t.Fatalf("err = %v, want wrong_cell", err)
		}
		if n, dir := len(fc.requests(""))-before, len(fc.requests(api.RouteDirectory))-dirBefore; n != 1 || dir != 1 {
			t.Fatalf("%d requests (%d directory reads) sent for a path on an unmapped prefix, want one directory read", n, dir)
		}
		if cell, err := c.CellFor("/demo/x/y"); err != nil || cell != fc.name {
			t.Fatalf("CellFor = %q, %v", cell, err)
		}
	})
}

func TestGiveUpWhenNoLeader(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 2)
		c := newTestClient(t, fc, nil)
		fc.SetLeader(-1)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Get(ctx, "/demo")
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want unavailable wrapping deadline exceeded", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("gave up after %v", d)
		}
		// Bounded, jittered backoff: a few attempts, not a hot loop.
		if n := len(fc.requests(api.RouteGet)); n < 2 || n > 30 {
			t.Fatalf("%d attempts in 300ms", n)
		}
	})
}

func TestAuthHeaderOnEveryRequest(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, func(cfg *Config) { cfg.AuthToken = "s3cret" })
		ctx := testCtx(t)
		if _, err := c.Create(ctx, "/demo/e", nil, Ephemeral()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, "/demo/e"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a keepalive", func() bool { return len(fc.requests(api.RouteSessionKeepAlive)) > 0 })
		for _, r := range fc.requests("") {
			if r.auth != "Bearer s3cret" {
				t.Fatalf("%s carried Authorization %q", r.route, r.auth)
			}
		}
	})
}

func TestWritesAndSessions(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)

		// Persistent write without a session: no header.
		if _, err := c.Put(ctx, "/demo/p", []byte("1")); err != nil {
			t.Fatal(err)
		}
		if h := decode[api.PutRequest](t, fc.requests(api.RoutePut)[0].body).WriteHeader; h != (api.WriteHeader{}) {
			t.Fatalf("sessionless put carried %+v", h)
		}
		if n := len(fc.requests(api.RouteSessionOpen)); n != 0 {
			t.Fatalf("a persistent put opened %d sessions", n)
		}

		// Ephemeral sequential create opens the session lazily.
		r1, err := c.Create(ctx, "/demo/q/item-", []byte("a"), Ephemeral(), Sequential(), MakeParents())
		if err != nil {
			t.Fatal(err)
		}
		if r1.Node.Path != "/demo/q/item-0000000000" || !r1.Node.Ephemeral { // a counter starts at 0
			t.Fatalf("create = %+v", r1.Node)
		}
		s, err := c.Session(ctx, fc.name)
		if err != nil {
			t.Fatal(err)
		}
		if r1.Node.Owner != s.ID() {
			t.Fatalf("owner %d, session %d", r1.Node.Owner, s.ID())
		}
		if n := len(fc.requests(api.RouteSessionOpen)); n != 1 {
			t.Fatalf("%d session opens", n)
		}

		// Now persistent writes go through the session for dedupe.
		if _, err := c.Put(ctx, "/demo/p", []byte("2"), WithVersion(1)); err != nil {
			t.Fatal(err)
		}
		puts := fc.requests(api.RoutePut)
		if h := decode[api.PutRequest](t, puts[len(puts)-1].body).WriteHeader; h.Session != s.ID() || h.Request == 0 {
			t.Fatalf("put with a live session carried %+v", h)
		}
		if _, err := c.Put(ctx, "/demo/p", []byte("3"), WithVersion(1)); !errors.Is(err, ErrVersionMismatch) {
			t.Fatalf("stale CAS err = %v", err)
		}
		if _, err := c.Put(ctx, "/demo/p", []byte("3"), MustNotExist()); !errors.Is(err, ErrNodeExists) {
			t.Fatalf("MustNotExist err = %v", err)
		}
		kids, node, err := c.Children(ctx, "/demo")
		if err != nil || !slices.Equal(kids, []string{"p", "q"}) || node.NumChildren != 2 {
			t.Fatalf("children = %v %+v %v", kids, node, err)
		}
		if err := c.Delete(ctx, "/demo/p", WithVersion(7)); !errors.Is(err, ErrVersionMismatch) {
			t.Fatalf("delete err = %v", err)
		}
		if err := c.Delete(ctx, "/demo/p", WithVersion(2)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRequestTracker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rt reqTracker
		rt.init()
		ctx := testCtx(t)
		if a := rt.ack(); a != 1 {
			t.Fatalf("ack before any request = %d, want 1", a)
		}
		var ids []uint64
		for range 3 {
			id, err := rt.begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if !slices.Equal(ids, []uint64{1, 2, 3}) {
			t.Fatalf("ids %v", ids)
		}
		check := func(want uint64) {
			t.Helper()
			if a := rt.ack(); a != want {
				t.Fatalf("ack = %d, want %d", a, want)
			}
		}
		check(1)
		rt.end(2)
		check(1)
		rt.end(1)
		check(3)
		rt.end(3)
		check(4)

		// The window: at most MaxSessionRequestWindow ids from the lowest outstanding.
		low, _ := rt.begin(ctx)
		for range api.MaxSessionRequestWindow - 1 {
			if _, err := rt.begin(ctx); err != nil {
				t.Fatal(err)
			}
		}
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		if _, err := rt.begin(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("begin past the window: %v", err)
		}
		got := make(chan uint64, 1)
		go func() {
			id, _ := rt.begin(ctx)
			got <- id
		}()
		synctest.Wait() // it waits for the window
		rt.end(low)
		synctest.Wait()
		select {
		case id := <-got:
			if id != low+api.MaxSessionRequestWindow {
				t.Fatalf("id %d after window opened", id)
			}
		default:
			t.Fatal("window did not open")
		}
	})
}

func TestRequestIDsAndAcksOnTheWire(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		s, err := c.Session(ctx, fc.name)
		if err != nil {
			t.Fatal(err)
		}
		const n = 40
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				_, err := c.Put(ctx, fmt.Sprintf("/demo/n%d", i), []byte("v"))
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		seen := map[uint64]bool{}
		for _, r := range fc.requests(api.RoutePut) {
			h := decode[api.PutRequest](t, r.body).WriteHeader
			if h.Session != s.ID() || h.Request < 1 || h.Request > n || h.Ack < 1 || h.Ack > h.Request {
				t.Fatalf("bad header %+v", h)
			}
			if seen[h.Request] {
				t.Fatalf("request id %d reused for another write", h.Request)
			}
			seen[h.Request] = true
		}
		if len(seen) != n {
			t.Fatalf("%d distinct ids, want %d", len(seen), n)
		}
		// Sequential writes: each acks everything before it.
		if _, err := c.Put(ctx, "/demo/last", nil); err != nil {
			t.Fatal(err)
		}
		puts := fc.requests(api.RoutePut)
		if h := decode[api.PutRequest](t, puts[len(puts)-1].body).WriteHeader; h.Request != n+1 || h.Ack != n+1 {
			t.Fatalf("last header %+v, want request=ack=%d", h, n+1)
		}
	})
}

func TestKeepAliveLongPollDeliversWatchEvent(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil) // lease 3s → wait 1s
		ctx := testCtx(t)

		_, exists, ch, err := c.GetW(ctx, "/demo/w")
		if err != nil || exists {
			t.Fatalf("GetW = %v, %v", exists, err)
		}
		s, _ := c.Session(ctx, fc.name)
		if !fc.armed(s.ID(), watchKey{"/demo/w", api.WatchData}) {
			t.Fatal("watch not armed on the cell")
		}
		sent0, lease := s.leaseBasis()
		if lease != 3*time.Second {
			t.Fatalf("lease %v", lease)
		}
		waitFor(t, "a keepalive in flight", func() bool { return len(fc.requests(api.RouteSessionKeepAlive)) > 0 })
		time.Sleep(50 * time.Millisecond)

		start := time.Now()
		if _, err := c.Put(ctx, "/demo/w", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		ev := recvEvent(t, ch)
		if ev.Type != api.EventCreated || ev.Path != "/demo/w" || ev.Kind != api.WatchData {
			t.Fatalf("event %+v", ev)
		}
		if d := time.Since(start); d > 700*time.Millisecond {
			t.Fatalf("event took %v: the long-poll did not return on the event", d)
		}

		// Long-poll cadence: wait_ms = lease/3, and no hot loop.
		time.Sleep(1200 * time.Millisecond)
		kas := fc.requests(api.RouteSessionKeepAlive)
		for _, r := range kas { // one leader, no failures: every KeepAlive long-polls
			if w := decode[api.KeepAliveRequest](t, r.body).WaitMS; w != 1000 {
				t.Fatalf("wait_ms %d, want 1000", w)
			}
		}
		if len(kas) < 2 || len(kas) > 6 {
			t.Fatalf("%d keepalives in ~1.3s", len(kas))
		}
		if sent, _ := s.leaseBasis(); !sent.After(sent0) {
			t.Fatal("lastConfirmedSend did not advance")
		}
	})
}

func TestChildrenWatch(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		kids, _, ch, err := c.ChildrenW(ctx, "/demo")
		if err != nil || len(kids) != 0 {
			t.Fatalf("ChildrenW = %v, %v", kids, err)
		}
		if _, err := c.Create(ctx, "/demo/k", nil); err != nil {
			t.Fatal(err)
		}
		if ev := recvEvent(t, ch); ev.Type != api.EventChildrenChanged || ev.Kind != api.WatchChildren {
			t.Fatalf("event %+v", ev)
		}
	})
}

// An event that reaches the client (in a KeepAlive reply) before the reply
// of the read that armed it is not lost.
func TestWatchEventRacingAheadOfRead(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		s, err := c.Session(ctx, fc.name)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a keepalive in flight", func() bool { return len(fc.requests(api.RouteSessionKeepAlive)) > 0 })
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route != api.RouteGet {
				return next()
			}
			status, resp := next() // arms the watch
			kas := len(fc.requests(api.RouteSessionKeepAlive))
			fc.handle(rep, api.RoutePut, mustMarshal(api.PutRequest{Path: "/demo/race", Value: []byte("x")})) // fires it
			// The client sends its next KeepAlive only after handling the reply
			// that carried the event.
			pollFor(t, "the event to reach the client", func() bool { return len(fc.requests(api.RouteSessionKeepAlive)) > kas })
			return status, resp
		})
		_, exists, ch, err := c.GetW(ctx, "/demo/race")
		if err != nil || exists {
			t.Fatalf("GetW = %v, %v", exists, err)
		}
		if ev := recvEvent(t, ch); ev.Type != api.EventCreated {
			t.Fatalf("event %+v", ev)
		}
		if fc.armed(s.ID(), watchKey{"/demo/race", api.WatchData}) {
			t.Fatal("the cell still holds the watch")
		}
	})
}

func TestFailoverReregistersWatches(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		if _, err := c.Put(ctx, "/demo/f", []byte("1")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, "/demo/g", []byte("1")); err != nil {
			t.Fatal(err)
		}
		_, _, chF, err := c.GetW(ctx, "/demo/f")
		if err != nil {
			t.Fatal(err)
		}
		_, _, chG, err := c.GetW(ctx, "/demo/g")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := c.Session(ctx, fc.name)
		epoch0 := s.Epoch()

		// Fail over, and change /demo/g before the client re-registers: the
		// new leader never saw the watch, so only Since can catch it.
		fc.failover(1)
		fc.handle(1, api.RoutePut, mustMarshal(api.PutRequest{Path: "/demo/g", Value: []byte("2")}))
		start := time.Now()

		select {
		case ev := <-s.Events():
			if ev.Type != SessionFailover || ev.Epoch != epoch0+1 || ev.Cell != fc.name {
				t.Fatalf("session event %+v", ev)
			}
		case <-time.After(testWait):
			t.Fatal("no failover event")
		}
		// The redirected KeepAlive asks for an immediate reply rather than
		// long-polling (wait is 1s) on the new leader.
		if d := time.Since(start); d > 700*time.Millisecond {
			t.Fatalf("fail-over noticed after %v", d)
		}
		var redirected bool
		for _, r := range fc.requests(api.RouteSessionKeepAlive) {
			if r.replica == 1 && decode[api.KeepAliveRequest](t, r.body).WaitMS == 0 {
				redirected = true
			}
		}
		if !redirected {
			t.Fatal("no immediate KeepAlive to the new leader")
		}
		if ev := recvEvent(t, chG); ev.Type != api.EventDataChanged || ev.Path != "/demo/g" {
			t.Fatalf("missed change not delivered: %+v", ev)
		}
		waitFor(t, "/demo/f re-armed on the new leader", func() bool { return fc.armed(s.ID(), watchKey{"/demo/f", api.WatchData}) })
		watches := fc.requests(api.RouteWatch)
		if len(watches) == 0 {
			t.Fatal("no /v1/watch")
		}
		var specs []api.WatchSpec
		for _, w := range watches {
			if w.replica != 1 {
				continue
			}
			req := decode[api.WatchRequest](t, w.body)
			if req.Session != s.ID() || req.Cell != fc.name {
				t.Fatalf("watch request %+v", req)
			}
			specs = append(specs, req.Watches...)
		}
		for _, sp := range specs {
			if sp.Kind != api.WatchData || sp.Since == 0 {
				t.Fatalf("spec %+v", sp)
			}
		}
		if len(specs) != 2 {
			t.Fatalf("specs %+v, want /demo/f and /demo/g", specs)
		}
		noEvent(t, chF, 50*time.Millisecond)
		if _, err := c.Put(ctx, "/demo/f", []byte("2")); err != nil {
			t.Fatal(err)
		}
		if ev := recvEvent(t, chF); ev.Type != api.EventDataChanged {
			t.Fatalf("event %+v", ev)
		}
	})
}

func TestSessionExpiryFailsWatches(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		if _, err := c.Create(ctx, "/demo/eph", nil, Ephemeral()); err != nil {
			t.Fatal(err)
		}
		_, _, ch, err := c.GetW(ctx, "/demo/x")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := c.Session(ctx, fc.name)
		fc.expire(s.ID())

		ev := recvEvent(t, ch)
		if ev.Type != EventSessionExpired || ev.Path != "/demo/x" {
			t.Fatalf("watch got %+v", ev)
		}
		var got []SessionEventType
		for e := range s.Events() { // closed after Expired
			got = append(got, e.Type)
			if e.Type == SessionExpired && !errors.Is(e.Err, ErrSessionExpired) {
				t.Fatalf("expired event err %v", e.Err)
			}
		}
		if !slices.Equal(got, []SessionEventType{SessionExpired}) {
			t.Fatalf("session events %v", got)
		}
		<-s.Done()
		if !errors.Is(s.Err(), ErrSessionExpired) {
			t.Fatalf("Err = %v", s.Err())
		}
		// The next call that needs a session opens a new one.
		if _, err := c.Create(ctx, "/demo/eph", nil, Ephemeral()); err != nil {
			t.Fatal(err)
		}
		s2, _ := c.Session(ctx, fc.name)
		if s2 == s || s2.ID() == s.ID() {
			t.Fatal("expired session reused")
		}
	})
}

func TestLockHooks(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		a := newTestClient(t, fc, nil)
		b := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		ra, chA, err := a.CreateLockNode(ctx, "/demo/locks/x", api.LockExclusive, []byte("a"))
		if err != nil {
			t.Fatal(err)
		}
		if ra.WaitFor != "" || ra.Token == 0 || api.Base(ra.Node.Path) != "w-0000000000" || chA == nil {
			t.Fatalf("first lock node %+v (channel %v)", ra, chA)
		}
		rb, chB, err := b.CreateLockNode(ctx, "/demo/locks/x", api.LockExclusive, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rb.WaitFor != ra.Node.Path || chB == nil {
			t.Fatalf("second lock node %+v", rb)
		}
		if h := decode[api.CreateRequest](t, fc.requests(api.RouteCreate)[1].body); h.Session == 0 || h.Request == 0 || !h.Ephemeral || !h.Sequential || h.Lock != api.LockExclusive {
			t.Fatalf("lock create request %+v", h)
		}
		// The watch the create armed, and one armed by LockState: both fire
		// on the predecessor's delete.
		st, chS, err := b.LockState(ctx, rb.Node.Path, true)
		if err != nil || !st.Exists || st.Held || chS == nil {
			t.Fatalf("LockState = %+v %v %v", st, chS, err)
		}
		if err := a.Delete(ctx, ra.Node.Path); err != nil {
			t.Fatal(err)
		}
		for _, ch := range []<-chan api.Event{chB, chS} {
			if ev := recvEvent(t, ch); ev.Type != api.EventDeleted || ev.Path != ra.Node.Path {
				t.Fatalf("event %+v", ev)
			}
		}
		st, chS, err = b.LockState(ctx, rb.Node.Path, true)
		if err != nil || !st.Held || st.Token == 0 || chS == nil { // a holder gets its own-node watch
			t.Fatalf("LockState after release = %+v %v %v", st, chS, err)
		}
		if _, _, err := a.CreateLockNode(ctx, "/demo/locks/x", "bogus", nil); !errors.Is(err, ErrBadRequest) {
			t.Fatalf("bad mode err = %v", err)
		}
		if got := WaitForPath("/demo/l/w-2", "w-1"); got != "/demo/l/w-1" {
			t.Fatal(got)
		}
		if got := WaitForPath("/demo/l/w-2", "/demo/l/w-1"); got != "/demo/l/w-1" {
			t.Fatal(got)
		}
	})
}

func TestCloseStopsEverything(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		cfg := Config{Endpoints: []string{fc.addr(0)}, Lease: 3 * time.Second, Dial: fc.Dial}
		c, err := New(testCtx(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		if _, err := c.Create(ctx, "/demo/e", nil, Ephemeral()); err != nil {
			t.Fatal(err)
		}
		_, _, ch, err := c.GetW(ctx, "/demo/e")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := c.Session(ctx, fc.name)
		waitFor(t, "a keepalive in flight", func() bool { return len(fc.requests(api.RouteSessionKeepAlive)) > 0 })

		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Close took %v: the long-poll was not interrupted", d)
		}
		if ev := recvEvent(t, ch); ev.Type != EventSessionClosed {
			t.Fatalf("watch got %+v", ev)
		}
		if !errors.Is(s.Err(), ErrClosed) {
			t.Fatalf("session Err = %v", s.Err())
		}
		closes := fc.requests(api.RouteSessionClose)
		if len(closes) != 1 || decode[api.CloseSessionRequest](t, closes[0].body).Session != s.ID() {
			t.Fatalf("session close requests: %d", len(closes))
		}
		if _, err := c.Get(ctx, "/demo"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Get after Close: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		fc.close()
		verifyNoBubbleLeaks(t)
	})
}

func TestCloseInterruptsRetryingCall(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c, err := New(testCtx(t), Config{Endpoints: []string{fc.addr(0)}, Dial: fc.Dial})
		if err != nil {
			t.Fatal(err)
		}
		fc.SetLeader(-1)
		done := make(chan error, 1)
		go func() {
			_, err := c.Get(context.Background(), "/demo")
			done <- err
		}()
		waitFor(t, "a few attempts", func() bool { return len(fc.requests(api.RouteGet)) >= 2 })
		_ = c.Close()
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("err = %v, want ErrClosed", err)
			}
		case <-time.After(testWait):
			t.Fatal("call kept retrying after Close")
		}
		fc.close()
		verifyNoBubbleLeaks(t)
	})
}

func TestFetchStatus(t *testing.T) {
	fc := newTCPFakeCell(t, 2)
	st, err := FetchStatus(testCtx(t), fc.addr(1), Access{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Cells) != 1 || st.Cells[0].Role != "follower" || st.APIAddr != fc.addr(1) {
		t.Fatalf("status %+v", st)
	}
	if _, err := FetchStatus(testCtx(t), deadAddr(t), Access{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("dead endpoint err = %v", err)
	}
}

func TestNewFailsWithoutEndpoints(t *testing.T) {
	if _, err := New(context.Background(), Config{}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := New(ctx, Config{Endpoints: []string{deadAddr(t)}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
}

func TestResyncFiresEveryWatch(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		_, _, ch1, err := c.GetW(ctx, "/demo/r1")
		if err != nil {
			t.Fatal(err)
		}
		_, _, ch2, err := c.ChildrenW(ctx, "/demo")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := c.Session(ctx, fc.name)
		fc.Queue(s.ID(), api.Event{Type: api.EventResync})
		if ev := recvEvent(t, ch1); ev.Type != api.EventResync || ev.Path != "/demo/r1" || ev.Kind != api.WatchData {
			t.Fatalf("event %+v", ev)
		}
		if ev := recvEvent(t, ch2); ev.Type != api.EventResync || ev.Path != "/demo" || ev.Kind != api.WatchChildren {
			t.Fatalf("event %+v", ev)
		}
	})
}

func TestSameWatchTwice(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		_, _, ch1, err := c.GetW(ctx, "/demo/s")
		if err != nil {
			t.Fatal(err)
		}
		_, _, ch2, err := c.GetW(ctx, "/demo/s")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, "/demo/s", nil); err != nil {
			t.Fatal(err)
		}
		recvEvent(t, ch1)
		recvEvent(t, ch2)
	})
}

func TestWrongCellFromServerRefreshesDirectory(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route == api.RouteGet {
				return fail(api.CodeWrongCell, "prefix moved")
			}
			return next()
		})
		before := len(fc.requests(api.RouteDirectory))
		if _, err := c.Get(testCtx(t), "/demo/x"); !errors.Is(err, ErrWrongCell) {
			t.Fatalf("err = %v", err)
		}
		if n := len(fc.requests(api.RouteDirectory)) - before; n != 1 {
			t.Fatalf("%d directory loads after wrong_cell, want 1", n)
		}
		if n := len(fc.requests(api.RouteGet)); n != 1 {
			t.Fatalf("%d get attempts", n)
		}
	})
}

func TestSessionCloseThenReopen(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		_, _, ch, err := c.GetW(ctx, "/demo/c")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := c.Session(ctx, fc.name)
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if ev := recvEvent(t, ch); ev.Type != EventSessionClosed {
			t.Fatalf("event %+v", ev)
		}
		if _, ok := <-s.Events(); ok {
			t.Fatal("events channel open after Close")
		}
		if n := len(fc.requests(api.RouteSessionClose)); n != 1 {
			t.Fatalf("%d close requests", n)
		}
		_, _, _, err = c.GetW(ctx, "/demo/c")
		if err != nil {
			t.Fatal(err)
		}
		if s2, _ := c.Session(ctx, fc.name); s2.ID() == s.ID() {
			t.Fatal("closed session reused")
		}
	})
}
