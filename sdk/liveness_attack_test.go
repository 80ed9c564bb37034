package sdk

// The hung-endpoint watch (liveness.go) against what it must not take for
// hung: a busy replica, a far one, a client closing; and what the SDK
// marks resendable for a lockproxy. From the attack review of the watch.

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
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
