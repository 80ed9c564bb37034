package sdk

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// hungCell is a fake cell whose replica 0 leads and then hangs on every
// route, /healthz too (a paused process, a machine gone: its connections
// stay open, nothing answers), and a session on it whose KeepAlive is
// confirmed. The client keeps its default attempt timeout (5 s) and
// HungAfter.
func hungCell(t *testing.T) (*fakeCell, *Client, *atomic.Bool) {
	fc := newFakeCell(t, 3)
	c := newTestClient(t, fc, func(cfg *Config) { cfg.RequestTimeout, cfg.Lease = 0, 12*time.Second })
	s, err := c.Session(testCtx(t), fc.name)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a confirmed KeepAlive", func() bool { return !s.Stats().LastConfirmed.IsZero() })
	var paused atomic.Bool
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		if rep == 0 && paused.Load() {
			<-release
			return fail(api.CodeUnavailable, "stopped")
		}
		return next()
	})
	return fc, c, &paused
}

// TestHungLeaderIsLeftEarly: a write sent to a leader that hangs (not
// killed: its connections stay open) goes to another replica once the
// hung one fails a health probe, about 2 × HungAfter after it was sent,
// not after the attempt timeout (5 s): the next leader, elected 1.2 s
// after the hang, commits it well inside the spec's 3 s fail-over.
func TestHungLeaderIsLeftEarly(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc, c, paused := hungCell(t)
		paused.Store(true)
		start := time.Now()
		elect := time.AfterFunc(1200*time.Millisecond, func() { fc.failover(1) })
		defer elect.Stop()
		if _, err := c.Put(testCtx(t), "/demo/hung", []byte("v")); err != nil {
			t.Fatalf("put across the hung leader: %v", err)
		}
		took := time.Since(start)
		t.Logf("put committed %v after it was sent to the hung leader", took)
		if limit := 2*DefaultHungAfter + 200*time.Millisecond; took > limit {
			t.Fatalf("the put took %v on the bubble's clock: past %v, it waited for its attempt timeout, not for the probe", took, limit)
		}
	})
}

// TestSlowReplicaIsNotHung: a replica that takes 4 s to answer a write
// but answers its health probe keeps the attempt: one request, no resend
// (a resend of a write not under a request id would be outcome-unknown).
func TestSlowReplicaIsNotHung(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		c := newTestClient(t, fc, func(cfg *Config) { cfg.RequestTimeout, cfg.Lease = 0, 12*time.Second })
		if _, err := c.Session(testCtx(t), fc.name); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		puts := 0
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route == api.RoutePut {
				mu.Lock()
				puts++
				mu.Unlock()
				time.Sleep(4 * time.Second) // a slow commit; /healthz answers meanwhile
			}
			return next()
		})
		if _, err := c.Put(testCtx(t), "/demo/slow", []byte("v")); err != nil {
			t.Fatalf("put on a slow replica: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if puts != 1 {
			t.Fatalf("the put was sent %d times: a replica that answers its probe was taken for hung", puts)
		}
	})
}

// TestHungWatchBounds: a timeout too short for the probe to end the
// attempt sooner is not watched, nor is any attempt with the watch off
// or the table full.
func TestHungWatchBounds(t *testing.T) {
	never := func(string, time.Duration) bool { return false }
	lv := newLiveness(time.Second, never)
	if w := lv.watch("a:1", 2*time.Second); w != nil {
		t.Fatal("an attempt of 2 × HungAfter is watched: it would end no sooner")
	}
	w := lv.watch("a:1", 3*time.Second)
	if w == nil {
		t.Fatal("an attempt of 3 × HungAfter is not watched")
	}
	w.stop()
	if w := newLiveness(0, never).watch("a:1", 10*time.Second); w != nil {
		t.Fatal("HungAfter 0 (off) watches")
	}
	if w := lv.watch("a:1", maxWatchedAttempt+time.Second); w != nil {
		t.Fatal("an administrative attempt (past maxWatchedAttempt) is watched")
	}
	for i := range maxLivenessEndpoints + 10 {
		lv.endpoint(fmt.Sprintf("10.0.0.1:%d", i))
	}
	if n := len(lv.eps); n > maxLivenessEndpoints {
		t.Fatalf("%d endpoints tracked, bound %d", n, maxLivenessEndpoints)
	}
	if lv.endpoint("10.0.0.2:1") == nil {
		t.Fatal("a new endpoint past the bound is not tracked: no entry was evicted for it")
	}
}
