package sdk

// The hung-endpoint watch (liveness.go) against what it must not take for
// hung: a busy replica, a far one, a client closing; and what the SDK
// marks resendable for a lockproxy. From the attack review of the watch.

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
)

// busyLeader runs n concurrent Gets on a leader that answers every Get
// (and /healthz at once) after hold, and reports how many Gets reached
// each replica and how many health probes reached the leader.
func busyLeader(t *testing.T, n int, hold time.Duration, hungAfter time.Duration) (gets [3]int, health int, errs int, took time.Duration) {
	fc := newFakeCell(t, 3)
	c := newTestClient(t, fc, func(cfg *Config) { cfg.RequestTimeout, cfg.Lease, cfg.HungAfter = 0, 12*time.Second, hungAfter })
	if _, err := c.Put(testCtx(t), "/demo/busy", []byte("v")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		mu.Lock()
		switch route {
		case api.RouteGet:
			gets[rep]++
		case api.RouteHealth:
			if rep == 0 {
				health++
			}
		}
		mu.Unlock()
		if route == api.RouteGet && rep == 0 {
			time.Sleep(hold) // a slow leader: it answers, later
		}
		return next()
	})
	start := time.Now()
	var wg sync.WaitGroup
	var emu sync.Mutex
	for range n {
		wg.Go(func() {
			if _, err := c.Get(testCtx(t), "/demo/busy"); err != nil {
				emu.Lock()
				if errs == 0 {
					t.Logf("first error: %v", err)
				}
				errs++
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	took = time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	return gets, health, errs, took
}

// TestFullPoolIsNotHung: bulkMaxConns (512) Gets held 2 s by the
// same live leader. The probe queues for a connection of the full pool
// (MaxConnWaitTimeout 1 s > HungAfter 750 ms), never reaches the leader,
// and every one of the 512 attempts is abandoned as hung and resent.
func TestFullPoolIsNotHung(t *testing.T) {
	bubble(t, func(t *testing.T) {
		gets, health, errs, took := busyLeader(t, bulkMaxConns, 2*time.Second, 0)
		t.Logf("n=%d: gets per replica %v, health probes answered by the leader %d, errors %d, took %v", bulkMaxConns, gets, health, errs, took)
		if gets[0] != bulkMaxConns || gets[1]+gets[2] != 0 {
			t.Fatalf("gets %v (%d sent for %d calls): a live leader with a full pool was taken for hung; its probe never reached it (%d answered)",
				gets, gets[0]+gets[1]+gets[2], bulkMaxConns, health)
		}
	})
}

// slowDialLeader: every new connection costs dial (a TLS handshake over
// a long round trip, a lost SYN's 1 s retransmission), and the leader
// takes hold to commit a put (it answers /healthz at once). It reports
// the put's error, how long it took and how often the leader got it.
func slowDialLeader(t *testing.T, dial, hold, hungAfter time.Duration) (took time.Duration, puts int, err error) {
	fc := newFakeCell(t, 3)
	var slow atomic.Bool
	c := newTestClient(t, fc, func(cfg *Config) {
		cfg.RequestTimeout, cfg.Lease, cfg.HungAfter = 0, 12*time.Second, hungAfter
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if slow.Load() {
				select {
				case <-time.After(dial):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return fc.Dial(ctx, network, addr)
		}
	})
	if _, err := c.Session(testCtx(t), fc.name); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		if route == api.RoutePut {
			mu.Lock()
			puts++
			mu.Unlock()
			time.Sleep(hold)
		}
		return next()
	})
	slow.Store(true)
	// An idle client: its pooled bulk connections close after
	// idleConnTimeout (5 s), so the put dials, and so does the probe.
	time.Sleep(idleConnTimeout + time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Put(ctx, "/demo/far", []byte("v"))
	took = time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	return took, puts, err
}

// TestSlowDialIsNotHung: connections cost 800 ms, a put takes
// 1.2 s to commit on a live leader. With the watch off (the behaviour
// before the change) it commits in 1.2 s; with the default watch every
// attempt is abandoned (the probe's new connection cannot open within
// HungAfter) and the put never commits within 10 s.
func TestSlowDialIsNotHung(t *testing.T) {
	for _, tc := range []struct {
		name string
		hung time.Duration
	}{{"watch off", -1}, {"watch on", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				took, puts, err := slowDialLeader(t, 800*time.Millisecond, 1200*time.Millisecond, tc.hung)
				t.Logf("%s: err=%v took=%v puts at the cell=%d", tc.name, err, took, puts)
				if err != nil || puts != 1 {
					t.Fatalf("a live leader 1.2 s slow, 800 ms to connect: err %v after %v, %d puts sent", err, took, puts)
				}
			})
		})
	}
}

// TestProbeEndsWithClose: a Get waits on a leader that hangs, and
// new connections to it never open (a dead machine: SYNs unanswered).
// The watch's probe is dialling when Close is called; Close returns and
// the probe's goroutine (liveness.go check → probeHealth) still runs:
// Close waits for abandoned attempts (transport.wg), not for probes.
func TestProbeEndsWithClose(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		var blackhole atomic.Bool
		c := newTestClient(t, fc, func(cfg *Config) {
			cfg.RequestTimeout = 0
			cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if blackhole.Load() && addr == fc.addr(0) {
					<-ctx.Done() // a SYN nobody answers
					return nil, ctx.Err()
				}
				return fc.Dial(ctx, network, addr)
			}
		})
		if _, err := c.Put(testCtx(t), "/demo/x", []byte("v")); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if rep == 0 {
				<-release
				return fail(api.CodeUnavailable, "stopped")
			}
			return next()
		})
		blackhole.Store(true)
		go func() { _, _ = c.Get(context.Background(), "/demo/x") }()
		time.Sleep(900 * time.Millisecond) // the watch fired at 750 ms: its probe dials
		_ = c.Close()
		synctest.Wait()
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if i := strings.Index(stacks, "probeHealth"); i >= 0 {
			j := strings.LastIndex(stacks[:i], "goroutine ")
			t.Errorf("a probe runs after Close returned:\n%s", stacks[j:min(len(stacks), i+300)])
		}
	})
}

// sniffConn records the request heads written on a connection.
type sniffConn struct {
	net.Conn
	log func(string)
}

func (c sniffConn) Write(p []byte) (int, error) {
	c.log(string(p))
	return c.Conn.Write(p)
}

// TestResendableOnlyWhenDeduplicated: through proxies a put under a
// session's request id carries Lockd-Resendable, a session-less put
// (applied twice if resent) never does. No test in sdk/ or proxy/ looked
// at what the SDK sends: marking every proxied call resendable survives
// them all (checked by hand: ./proxy and the sdk proxy tests pass).
func TestResendableOnlyWhenDeduplicated(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		var mu sync.Mutex
		var heads []string
		c := newTestClient(t, fc, func(cfg *Config) {
			cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				nc, err := fc.Dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return sniffConn{nc, func(s string) {
					if strings.HasPrefix(s, "POST "+api.RoutePut+" ") {
						mu.Lock()
						heads = append(heads, s)
						mu.Unlock()
					}
				}}, nil
			}
		})
		cs, err := c.cellForPath("/demo/x")
		if err != nil {
			t.Fatal(err)
		}
		cs.setProxied(true) // as if its endpoints were lockproxies
		marked := func() bool {
			mu.Lock()
			defer mu.Unlock()
			h := heads[len(heads)-1]
			heads = nil
			return strings.Contains(h, api.HeaderResendable+": 1")
		}
		if _, err := c.Put(testCtx(t), "/demo/x", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if marked() {
			t.Error("a session-less put (no request id) went marked Lockd-Resendable: a proxy may apply it twice")
		}
		if _, err := c.Session(testCtx(t), fc.name); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(testCtx(t), "/demo/x", []byte("w")); err != nil {
			t.Fatal(err)
		}
		if !marked() {
			t.Error("a put under a session's request id went unmarked: a proxy waits out a hung leader")
		}
	})
}

// TestProbeSingleFlight: 200 attempts watched on one endpoint that
// answers nothing: one probe at a time, every watch ends hung, and stops
// racing the checks leave no timer firing afterwards (run with -race).
func TestProbeSingleFlight(t *testing.T) {
	var inFlight, most, probes atomic.Int32
	lv := newLiveness(20*time.Millisecond, func(string, time.Duration) bool {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		probes.Add(1)
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		return false
	})
	var wg sync.WaitGroup
	var hung atomic.Int32
	for i := range 200 {
		wg.Go(func() {
			w := lv.watch("a:1", time.Second)
			if i%2 == 0 {
				time.Sleep(time.Duration(i%40) * time.Millisecond)
				w.stop() // an attempt answered, racing the check
				return
			}
			select {
			case <-w.C():
				hung.Add(1)
			case <-time.After(time.Second):
			}
			w.stop()
		})
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	t.Logf("probes %d, at most %d at once, %d of 100 watched attempts found hung", probes.Load(), most.Load(), hung.Load())
	if most.Load() != 1 || hung.Load() != 100 {
		t.Fatalf("probes at once %d, hung %d", most.Load(), hung.Load())
	}
}

// A probe is never sent on a pooled connection the server
// has closed (a restarted lockd or lockproxy, an idle timeout under the
// client's 5 s: the fake's is 1 s), which would fail at once and condemn
// a live, merely slow, leader: each probe opens its own.
func TestStaleProbeConnIsNotHung(t *testing.T) {
	longIdle(t)
	bubble(t, func(t *testing.T) {
		t.Cleanup(func() { time.Sleep(6 * time.Second) }) // the 5 s janitors end
		fc := newFakeCell(t, 3)                           // server IdleTimeout 1 s
		c := newTestClient(t, fc, func(cfg *Config) { cfg.RequestTimeout, cfg.Lease = 0, 12*time.Second })
		if _, err := c.Session(testCtx(t), fc.name); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		puts, health := 0, 0
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			mu.Lock()
			switch route {
			case api.RoutePut:
				puts++
			case api.RouteHealth:
				health++
			}
			mu.Unlock()
			if route == api.RoutePut && rep == 0 {
				time.Sleep(1200 * time.Millisecond) // slow commit, alive
			}
			return next()
		})
		if _, err := c.Put(testCtx(t), "/demo/a", []byte("1")); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		t.Logf("first put: puts=%d health=%d", puts, health)
		mu.Unlock()
		// Keep the attempts' connection fresh; the probe's idles past the
		// server's idle timeout and is closed by the server.
		for range 6 {
			time.Sleep(300 * time.Millisecond)
			if _, err := c.Get(testCtx(t), "/demo/a"); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		puts, health = 0, 0
		mu.Unlock()
		start := time.Now()
		_, err := c.Put(testCtx(t), "/demo/a", []byte("2"))
		took := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		t.Logf("second put: err=%v took=%v puts sent=%d health answered=%d", err, took, puts, health)
		if puts != 1 {
			t.Fatalf("a live leader was taken for hung: the put went %d times", puts)
		}
	})
}

// longIdle restores the client's production idle timeout (5 s; the
// package's tests run with 100 ms).
func longIdle(t *testing.T) {
	old := idleConnTimeout
	idleConnTimeout = 5 * time.Second
	t.Cleanup(func() { idleConnTimeout = old })
}

// blackholeClient: a client of a fake cell (server idle timeout 1 min) whose
// new connections to replica 0 never open once *hole is set (a dead
// machine's unanswered SYN, or a TLS handshake with a SIGSTOPped lockd),
// and whose replica 0 answers nothing once *paused is set. dial, when
// positive, is the time every new connection to replica 0 takes once
// *slow is set.
var holed atomic.Int32

func blackholeClient(t *testing.T, dial time.Duration) (fc *fakeCell, c *Client, hole, paused, slow *atomic.Bool) {
	fc = startFakeCell(t, fake.Options{Replicas: 3, Memory: true, IdleTimeout: time.Minute})
	hole, paused, slow = new(atomic.Bool), new(atomic.Bool), new(atomic.Bool)
	c = newTestClient(t, fc, func(cfg *Config) {
		cfg.RequestTimeout, cfg.Lease = 0, 12*time.Second
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == fc.addr(0) {
				if hole.Load() {
					holed.Add(1)
					<-ctx.Done()
					return nil, ctx.Err()
				}
				if slow.Load() {
					select {
					case <-time.After(dial):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
			}
			return fc.Dial(ctx, network, addr)
		}
	})
	if _, err := c.Session(testCtx(t), fc.name); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		if rep == 0 && paused.Load() && route != api.RouteSessionKeepAlive {
			<-release
			return fail(api.CodeUnavailable, "stopped")
		}
		return next()
	})
	return fc, c, hole, paused, slow
}

// A put already sent on an open connection to a hung
// leader is left early even while another call dials the same leader
// (and that dial never ends: a dead machine, or TLS to a paused process),
// and so is one whose own dial never ends: a pending dial defers a
// watch's probe once, for HungAfter plus the endpoint's dial time.
func TestDialInFlightHidesNoHang(t *testing.T) {
	longIdle(t)
	for _, tc := range []struct {
		name             string
		concurrent, idle bool
	}{{"alone", false, false}, {"with a concurrent dial", true, false}, {"an idle client (its pool expired)", false, true}} {
		concurrent := tc.concurrent
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				t.Cleanup(func() { time.Sleep(6 * time.Second) }) // the 5 s janitors end
				holed.Store(0)
				fc, c, hole, paused, _ := blackholeClient(t, 0)
				if _, err := c.Put(testCtx(t), "/demo/h", []byte("v")); err != nil { // a pooled conn to rep 0
					t.Fatal(err)
				}
				if tc.idle {
					time.Sleep(idleConnTimeout + time.Second)
				}
				paused.Store(true)
				hole.Store(true)
				elect := time.AfterFunc(1200*time.Millisecond, func() { fc.failover(1) })
				defer elect.Stop()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				var wg sync.WaitGroup
				var tookA time.Duration
				start := time.Now()
				wg.Go(func() {
					if _, err := c.Put(ctx, "/demo/h", []byte("a")); err != nil {
						t.Error(err)
					}
					tookA = time.Since(start)
				})
				if concurrent {
					time.Sleep(10 * time.Millisecond) // A holds the pooled conn; B must dial
					wg.Go(func() { _, _ = c.Get(ctx, "/demo/h") })
				}
				wg.Wait()
				t.Logf("put on the open connection committed after %v; dials to the hung leader that never opened: %d", tookA, holed.Load())
				if limit := 2*DefaultHungAfter + 200*time.Millisecond; tookA > limit {
					t.Fatalf("put took %v (> %v): the watch never probed while another attempt dialled", tookA, limit)
				}
			})
		})
	}
}

// TestDialEstimate: one slow dial (a lost SYN) after fast ones moves the
// probe's allowance a quarter of the way, not all of it (a hang after it
// would otherwise cost the attempt timeout again); an endpoint whose
// every dial is slow (far away) is given what its dials take, so its
// probes are not taken for silence; the allowance is bounded.
func TestDialEstimate(t *testing.T) {
	lv := newLiveness(750*time.Millisecond, func(string, time.Duration) bool { return true })
	ep := lv.endpoint("a:1")
	if got := ep.dialAllowance(); got != 0 {
		t.Fatalf("no dial yet: allowance %v", got)
	}
	for range 8 {
		ep.noteDial(time.Millisecond)
	}
	ep.noteDial(4 * time.Second)
	if got := ep.dialAllowance(); got > 1100*time.Millisecond {
		t.Fatalf("one 4 s dial after 1 ms ones: allowance %v, want about a quarter", got)
	}
	far := lv.endpoint("far:1")
	for range 20 {
		far.noteDial(2 * time.Second)
	}
	if got := far.dialAllowance(); got < 1900*time.Millisecond {
		t.Fatalf("every dial 2 s: allowance %v, want about 2 s", got)
	}
	for range 20 {
		far.noteDial(time.Minute)
	}
	if got := far.dialAllowance(); got != maxDialAllowance {
		t.Fatalf("every dial a minute: allowance %v, want the bound %v", got, maxDialAllowance)
	}
}

// TestEvictionSparesBusyEntries: past maxLivenessEndpoints the entry
// evicted is the one heard from longest ago with nothing in flight, not
// a busy endpoint's (its connections keep the entry they opened with).
func TestEvictionSparesBusyEntries(t *testing.T) {
	lv := newLiveness(50*time.Millisecond, func(string, time.Duration) bool { return true })
	busy := lv.endpoint("busy:1")
	done := busy.dialStart() // an attempt's dial in flight
	defer done(true, time.Second)
	for i := range maxLivenessEndpoints + 100 {
		lv.endpoint(fmt.Sprintf("10.0.%d.%d:1", i/250, i%250))
		busy.heardNow()
	}
	if lv.endpoint("busy:1") != busy {
		t.Fatal("a busy endpoint's entry was evicted")
	}
	if n := len(lv.eps); n > maxLivenessEndpoints {
		t.Fatalf("%d entries, bound %d", n, maxLivenessEndpoints)
	}
}
