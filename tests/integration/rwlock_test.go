package integration_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// waitCodecV2 waits until every cell's leader writes log codec 2 (a
// cluster of one build raises it by itself), so that issue 26's
// vocabulary is accepted.
func waitCodecV2(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		low := -1
		for _, st := range c.Statuses(context.Background()) {
			for _, rs := range st.Cells {
				if rs.Role == "leader" && (low < 0 || int(rs.LogCodec) < low) {
					low = int(rs.LogCodec)
				}
			}
		}
		if low >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cells still write log codec %d", low)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cellNodes is the node count the cells' leaders report, summed.
func cellNodes(c *cluster.Cluster) int {
	total := 0
	for _, st := range c.Statuses(context.Background()) {
		for _, rs := range st.Cells {
			if rs.Role == "leader" {
				total += rs.Nodes
			}
		}
	}
	return total
}

// TestDowngradeWakesExactlyTheReadersBehind, on real processes, each
// holder its own client and session: a writer holds; two readers, a
// second writer and a third reader queue behind it. The writer
// downgrades: the two readers behind it are granted and hold beside it
// (same node, same token); the second writer and the reader behind it
// still wait, and the second writer was not woken (it waits on the
// second reader). Then an upgradable reader joins, upgrades once the
// others leave, and holds as the writer with a token above all.
func TestDowngradeWakesExactlyTheReadersBehind(t *testing.T) {
	t.Parallel()
	const path = "/demo/rw/lock"
	c := cluster.Start(t, cluster.Options{})
	waitCodecV2(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	probe := newSDK(t, c, 12*time.Second)
	o := &rwObserver{t: t}

	w1 := newRWHolder(ctx, t, c, o, path, "w1", false)
	w1.granted(t, 30*time.Second)
	var queued []*rwHolder
	for i, name := range []string{"r1", "r2", "w2", "r3"} {
		queued = append(queued, newRWHolder(ctx, t, c, o, path, name, name[0] == 'r'))
		waitChildren(t, probe, path, 2+i)
	}
	r1, r2, w2, r3 := queued[0], queued[1], queued[2], queued[3]
	for _, h := range queued {
		h.waiting(t, 0, "behind a writer")
	}
	token := w1.m.Token()
	// w1 stops acting as the writer before it downgrades, as a holder
	// stops before Unlock: once the downgrade commits, the readers behind
	// may be granted before Downgrade has returned to w1.
	o.mu.Lock()
	o.writers, o.readers = 0, 1 // w1 holds on as a reader
	o.mu.Unlock()
	must(t, w1.m.Downgrade(ctx))
	r1.granted(t, 30*time.Second)
	r2.granted(t, 30*time.Second)
	if w1.m.Token() != token || !w1.m.Held() || w1.m.Context().Err() != nil {
		t.Fatalf("after the downgrade: token %d (was %d), held %v", w1.m.Token(), token, w1.m.Held())
	}
	w2.waiting(t, 500*time.Millisecond, "behind readers after the downgrade")
	r3.waiting(t, 0, "behind a waiting writer")
	if got := w2.m.Wakeups(); got != 0 {
		t.Errorf("the writer behind was woken %d times by the downgrade, want 0", got)
	}
	if chk, err := probe.CheckToken(ctx, path, token); err != nil || !chk.Valid || len(chk.Holders) != 3 {
		t.Fatalf("the downgraded token: %+v %v, want valid among 3 holders", chk, err)
	}

	// The readers leave: the second writer, then the reader behind it.
	for _, h := range []*rwHolder{w1, r1, r2} {
		o.leave(h.name, true)
		must(t, h.m.Unlock(ctx))
	}
	w2.granted(t, 30*time.Second)
	r3.waiting(t, 200*time.Millisecond, "while the second writer holds")
	w2.release(ctx, t, o)
	r3.granted(t, 30*time.Second)

	// An upgradable reader beside r3 upgrades: it waits for r3 alone.
	u := newSDK(t, c, 12*time.Second).NewMutex(path, sdk.Upgradable())
	must(t, u.Lock(ctx))
	done := make(chan error, 1)
	go func() { done <- u.Upgrade(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("upgrade returned (%v) while a reader holds", err)
	case <-time.After(300 * time.Millisecond):
	}
	r3.release(ctx, t, o)
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("upgrade not granted after the last reader left")
	}
	if u.Token() <= r3.token || u.Token() <= w2.token {
		t.Fatalf("upgraded token %d not above %d and %d", u.Token(), r3.token, w2.token)
	}
	must(t, u.Unlock(ctx))
}

// TestContainersGoWithTheirLastLock, on real processes: lock
// directories, each locked and unlocked once through the SDK's Mutex by
// a few workers, leave nothing behind: the cell's node count is where it
// started (each directory was a container, deleted with its lock node).
// 1 000 in make test; the 10 000 with LOCKD_LONG=1 (about two
// minutes under -race).
func TestContainersGoWithTheirLastLock(t *testing.T) {
	t.Parallel()
	const workers = 8
	dirs := int64(1_000)
	if os.Getenv("LOCKD_LONG") == "1" {
		dirs = 10_000
	}
	c := cluster.Start(t, cluster.Options{})
	waitCodecV2(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	probe := newSDK(t, c, 12*time.Second)
	_, err := probe.Put(ctx, "/demo/keep", []byte("x"))
	must(t, err)
	before := cellNodes(c)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := newSDK(t, c, 12*time.Second)
			for i := next.Add(1) - 1; i < dirs; i = next.Add(1) - 1 {
				m := cl.NewMutex(fmt.Sprintf("/demo/entities/e%05d/lock", i))
				if err := m.Lock(ctx); err != nil {
					errs <- err
					return
				}
				if err := m.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d lock directories used once in %v", dirs, time.Since(start).Round(time.Millisecond))
	deadline := time.Now().Add(30 * time.Second)
	for got := cellNodes(c); got != before; got = cellNodes(c) {
		if time.Now().After(deadline) {
			names, _, _ := probe.Children(ctx, "/demo")
			t.Fatalf("%d nodes after, %d before; /demo holds %d children", got, before, len(names))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := probe.Get(ctx, "/demo/entities"); err == nil {
		t.Fatal("/demo/entities outlived its last lock")
	}
}
