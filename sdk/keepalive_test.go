package sdk

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// TestKeepAliveSurvivesTwoHungReplicas: the leader hangs (paused) with
// the session's long-poll KeepAlive in it, and so does the next replica
// the client tries; the third leads. The KeepAlive must reach it before a
// lease has passed since the hung one was sent: a retry asks for an
// immediate reply and waits for one a margin only, not a long poll's
// time. (A 10-minute fault run lost two sessions so: a paused leader, and
// 5 s later the next one paused past the lease, took both attempts' long
// timeouts, 12 s of the 12 s lease.)
func TestKeepAliveSurvivesTwoHungReplicas(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		const lease = 3 * time.Second
		c := newTestClient(t, fc, func(cfg *Config) { cfg.Lease = lease })
		ctx := testCtx(t)
		s, err := c.Session(ctx, fc.name)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a confirmed KeepAlive", func() bool { return !s.Stats().LastConfirmed.IsZero() })

		var mu sync.Mutex
		var hungAt, reachedAt time.Time // the first KeepAlive hung; the first to reach the new leader
		var order []int
		release := make(chan struct{})
		defer close(release)
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route != api.RouteSessionKeepAlive {
				return next()
			}
			mu.Lock()
			order = append(order, rep)
			switch {
			case rep == 2 && reachedAt.IsZero() && !hungAt.IsZero():
				reachedAt = time.Now()
			case rep != 2 && hungAt.IsZero():
				hungAt = time.Now()
			}
			mu.Unlock()
			if rep != 2 {
				<-release // a paused process: it never answers
				return fail(api.CodeUnavailable, "stopped")
			}
			return next()
		})
		// Replica 0 leads and hangs; 2 leads once the client looks
		// elsewhere, and 1 hangs too.
		waitFor(t, "the long poll to hang in replica 0", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return !hungAt.IsZero()
		})
		fc.failover(2)
		waitFor(t, "a KeepAlive at the new leader", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return !reachedAt.IsZero()
		})
		mu.Lock()
		took, tried := reachedAt.Sub(hungAt), append([]int(nil), order...)
		mu.Unlock()
		t.Logf("KeepAlives to replicas %v: the new leader reached %v after the hung one was sent", tried, took)
		if took >= lease {
			t.Fatalf("the session's KeepAlive reached the new leader %v after the hung one was sent (lease %v): its lease ran out on the way", took, lease)
		}
	})
}

// TestKeepAliveSlowDialSurvives: a client whose connections take longer
// to open than a retry's first timeout (lease/6, at least 500 ms: a
// distant cell, TCP and TLS handshakes) keeps its session on a healthy
// cell after one KeepAlive reply is lost (its attempt times out, its
// connection is closed, every attempt after it must dial). Retries with a
// flat margin never dialled in time and lost the session (the attack on
// the hung-replica fix); doubling reaches the dial's time.
func TestKeepAliveSlowDialSurvives(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		const lease, dialTime = 3 * time.Second, 600 * time.Millisecond // retries start at 500 ms
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			select {
			case <-time.After(dialTime):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return fc.Dial(ctx, network, addr)
		}
		c := newTestClient(t, fc, func(cfg *Config) { cfg.Lease, cfg.Grace, cfg.Dial = lease, 5*time.Second, dial })
		s, err := c.Session(testCtx(t), fc.name)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a confirmed KeepAlive", func() bool { return !s.Stats().LastConfirmed.IsZero() })
		var mu sync.Mutex
		lost := false
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			mu.Lock()
			first := !lost && route == api.RouteSessionKeepAlive
			lost = lost || first
			mu.Unlock()
			if first {
				time.Sleep(2 * time.Second) // its reply lost: the attempt times out
			}
			return next()
		})
		time.Sleep(20 * time.Second)
		st := s.Stats()
		t.Logf("20 s after one lost reply: %d KeepAlives sent, %d failed, last confirmed %v ago", st.KeepAlivesSent, st.KeepAlivesFailed, time.Since(st.LastConfirmed).Round(time.Millisecond))
		if st.Ended {
			t.Fatalf("session lost to one lost KeepAlive reply on a healthy cell whose connections open in %v: %v", dialTime, s.Err())
		}
		if since := time.Since(st.LastConfirmed); since > lease {
			t.Fatalf("no KeepAlive confirmed for %v", since)
		}
	})
}
