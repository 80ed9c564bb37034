package integration_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

func newSDK(t testing.TB, c *cluster.Cluster, lease time.Duration) *sdk.Client {
	t.Helper()
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), Lease: lease})
	must(t, err)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestRecipesSmoke: mutexes hand off in order with increasing tokens,
// TryLock times out cleanly, an election has one leader, members are listed.
func TestRecipesSmoke(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const n = 5
	var (
		mu     sync.Mutex
		tokens []uint64
		inside int
		wg     sync.WaitGroup
	)
	for i := 0; i < n; i++ {
		cl := newSDK(t, c, 3*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := cl.NewMutex("/demo/smoke/lock")
			if err := m.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			if inside != 1 {
				t.Errorf("%d holders at once", inside)
			}
			tokens = append(tokens, m.Token())
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens not increasing: %v", tokens)
		}
	}

	a, b := newSDK(t, c, 3*time.Second), newSDK(t, c, 3*time.Second)
	ma := a.NewMutex("/demo/smoke/try")
	must(t, ma.Lock(ctx))
	if err := b.NewMutex("/demo/smoke/try").TryLock(ctx, 300*time.Millisecond); !errors.Is(err, sdk.ErrLockTimeout) {
		t.Fatalf("TryLock: %v, want ErrLockTimeout", err)
	}
	names, _, err := a.Children(ctx, "/demo/smoke/try")
	must(t, err)
	if len(names) != 1 {
		t.Fatalf("TryLock left nodes behind: %v", names)
	}
	if ma.Context().Err() != nil {
		t.Fatal("holder's context is not live")
	}
	must(t, ma.Unlock(ctx))

	e1, e2 := a.NewElection("/demo/smoke/elect"), b.NewElection("/demo/smoke/elect")
	must(t, e1.Campaign(ctx, []byte("a")))
	obs := b.NewElection("/demo/smoke/elect").Observe(ctx)
	if l := <-obs; string(l.Value) != "a" {
		t.Fatalf("observed leader %q", l.Value)
	}
	done := make(chan error, 1)
	go func() { done <- e2.Campaign(ctx, []byte("b")) }()
	// e2 in line before e1 resigns: else the observer rightly sees a
	// moment with no leader.
	waitChildren(t, a, "/demo/smoke/elect", 2)
	must(t, e1.Resign(ctx))
	must(t, <-done)
	if l, err := a.NewElection("/demo/smoke/elect").Leader(ctx); err != nil || string(l.Value) != "b" {
		t.Fatalf("leader %q, %v", l.Value, err)
	}
	if l := <-obs; string(l.Value) != "b" {
		t.Fatalf("observed leader %q after resign", l.Value)
	}

	_, err = a.Join(ctx, "/demo/smoke/group", []byte("x"))
	must(t, err)
	_, err = b.Join(ctx, "/demo/smoke/group", []byte("y"))
	must(t, err)
	ms, err := a.Members(ctx, "/demo/smoke/group")
	must(t, err)
	if len(ms) != 2 || string(ms[0].Value) != "x" || string(ms[1].Value) != "y" {
		t.Fatalf("members %+v", ms)
	}
}
