package integration_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/internal/testcluster"
	"github.com/lockservice/lockd/sdk"
)

// TestRecipes runs the lock recipes on one real 5-replica cluster.
func TestRecipes(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	t.Run("HandoffWakesOneWaiter", func(t *testing.T) { testHandoffWakesOne(t, c) })
	t.Run("SharedLocks", func(t *testing.T) { testSharedLocks(t, c) })
	t.Run("JeopardyThenSafe", func(t *testing.T) { testJeopardy(t, c) })
}

// 40 contenders, each with its own session: every release wakes exactly one
// waiter (the recipe watches only the predecessor), so the wake-ups of all
// waiters add up to the number of handoffs they waited through.
func testHandoffWakesOne(t *testing.T, c *testcluster.Cluster) {
	const n = 40
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	first := newSDK(t, c, 3*time.Second)
	holder := first.NewMutex("/demo/herd/lock")
	must(t, holder.Lock(ctx))
	mutexes := make([]*sdk.Mutex, n)
	for i := range mutexes {
		mutexes[i] = newSDK(t, c, 3*time.Second).NewMutex("/demo/herd/lock")
	}
	var (
		wg     sync.WaitGroup
		inside atomic.Int32
		order  = make(chan uint64, n)
	)
	for _, m := range mutexes {
		wg.Add(1)
		go func(m *sdk.Mutex) {
			defer wg.Done()
			if err := m.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			if inside.Add(1) != 1 {
				t.Error("two holders at once")
			}
			order <- m.Token()
			inside.Add(-1)
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}(m)
	}
	// Let every waiter queue behind the holder, then release.
	deadline := time.Now().Add(30 * time.Second)
	for {
		names, _, err := first.Children(ctx, "/demo/herd/lock")
		must(t, err)
		if len(names) == n+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d waiters queued", len(names)-1, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, holder.Unlock(ctx))
	wg.Wait()
	close(order)
	prev := uint64(0)
	for tok := range order {
		if tok <= prev {
			t.Fatalf("token %d after %d", tok, prev)
		}
		prev = tok
	}
	var wakeups int64
	for _, m := range mutexes {
		wakeups += m.Wakeups()
	}
	// Each waiter is woken once, by its predecessor's release.
	if wakeups != n {
		t.Fatalf("%d wake-ups for %d handoffs: a release woke more than one waiter", wakeups, n)
	}
	t.Logf("%d handoffs, %d wake-ups", n, wakeups)
}

// Readers hold together; a writer waits for all of them; a reader queued
// behind a waiting writer waits for the writer.
func testSharedLocks(t *testing.T, c *testcluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const path = "/demo/rw/lock"
	r1 := newSDK(t, c, 3*time.Second).NewMutex(path, sdk.Shared())
	r2 := newSDK(t, c, 3*time.Second).NewMutex(path, sdk.Shared())
	must(t, r1.Lock(ctx))
	must(t, r2.Lock(ctx)) // held together
	w := newSDK(t, c, 3*time.Second).NewMutex(path)
	wDone := make(chan error, 1)
	go func() { wDone <- w.Lock(ctx) }()
	waitChildren(t, newSDK(t, c, 3*time.Second), path, 3)
	r3 := newSDK(t, c, 3*time.Second).NewMutex(path, sdk.Shared())
	r3Done := make(chan error, 1)
	go func() { r3Done <- r3.Lock(ctx) }()
	waitChildren(t, newSDK(t, c, 3*time.Second), path, 4)

	must(t, r1.Unlock(ctx))
	select {
	case err := <-wDone:
		t.Fatalf("writer got the lock beside a reader (err %v)", err)
	case <-r3Done:
		t.Fatal("reader behind a waiting writer got the lock")
	case <-time.After(300 * time.Millisecond):
	}
	must(t, r2.Unlock(ctx))
	must(t, <-wDone)
	select {
	case <-r3Done:
		t.Fatal("reader got the lock beside the writer")
	case <-time.After(300 * time.Millisecond):
	}
	if w.Token() <= 0 {
		t.Fatal("writer has no token")
	}
	must(t, w.Unlock(ctx))
	must(t, <-r3Done)
	if r3.Token() <= w.Token() {
		t.Fatalf("reader token %d not above writer's %d", r3.Token(), w.Token())
	}
	must(t, r3.Unlock(ctx))
}

func waitChildren(t *testing.T, cl *sdk.Client, path string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if names, _, err := cl.Children(ctx, path); err == nil && len(names) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never had %d children", path, n)
}

// With every replica paused, the holder enters jeopardy before the cell
// could have freed its lease and its Context is cancelled. Then the leader
// dies and the others resume (the spec's scenario 4): the new leader gives
// every session a full lease, so inside the grace period the session is
// safe with the same node and token, and Context is live again.
func testJeopardy(t *testing.T, c *testcluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const lease = 3 * time.Second
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), Lease: lease, Grace: 20 * time.Second})
	must(t, err)
	defer cl.Close()
	m := cl.NewMutex("/demo/jeopardy/lock")
	must(t, m.Lock(ctx))
	sess, err := cl.Session(ctx, "demo")
	must(t, err)
	node, token, lockCtx := m.Node(), m.Token(), m.Context()
	leader, err := c.LeaderOf("demo")
	must(t, err)

	for _, id := range c.IDs() {
		must(t, c.Pause(id))
	}
	paused := time.Now()
	// The cell cannot expire the session before lastConfirmedSend + lease.
	cellEarliest := sess.LocalExpiry().Add(sdk.DriftMargin(lease))
	select {
	case <-lockCtx.Done():
	case <-time.After(2 * lease):
		t.Fatal("lock context not cancelled while the cell was unreachable")
	}
	if now := time.Now(); !now.Before(cellEarliest) {
		t.Fatalf("jeopardy at %v, not before the cell's earliest expiry %v", now, cellEarliest)
	}
	if !sess.InJeopardy() {
		t.Fatal("session not in jeopardy")
	}
	t.Logf("jeopardy %v after the pause", time.Since(paused).Round(time.Millisecond))
	must(t, c.Kill(leader))
	for _, id := range c.IDs() {
		if id != leader {
			must(t, c.Resume(id))
		}
	}
	defer func() { must(t, c.Restart(leader)) }()
	deadline := time.Now().Add(15 * time.Second)
	for sess.InJeopardy() {
		if time.Now().After(deadline) {
			t.Fatal("session never safe again after the cell returned")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sess.Err() != nil {
		t.Fatalf("session ended: %v", sess.Err())
	}
	if m.Node() != node || m.Token() != token || !m.Held() {
		t.Fatalf("after safe: node %s token %d held %v; want %s %d", m.Node(), m.Token(), m.Held(), node, token)
	}
	if m.Context().Err() != nil {
		t.Fatal("lock context not live after safe")
	}
	if err := m.Unlock(ctx); err != nil && !errors.Is(err, sdk.ErrLockLost) {
		t.Fatal(err)
	}
}
