package sdk

import (
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
