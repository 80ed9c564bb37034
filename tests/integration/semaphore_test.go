package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// The semaphore scenario's shape.
const (
	semPath        = "/demo/sem/pool"
	semPermits     = 3
	semContenders  = 30 // one of them the lockctl holder process
	semLease       = 3 * time.Second
	semQueuePoll   = 50 * time.Millisecond
	maxSemQueueObs = 5000
)

// semRecorder gathers the in-process contenders' permits and live spans
// on one monotonic clock (t0), and the service's queue as polled.
type semRecorder struct {
	t0 time.Time

	mu       sync.Mutex
	ivs      []check.Interval
	grants   []check.PermitGrant
	byWorker map[string]int
	maxInUse int
	polls    int
}

func (r *semRecorder) now() time.Duration { return time.Since(r.t0) }

// contend takes permits over and over until ctx ends: Acquire, hold for
// hold while the permit's Context is live (its live span recorded),
// Release.
func (r *semRecorder) contend(ctx context.Context, t *testing.T, s *sdk.Semaphore, worker string, hold time.Duration) {
	for i := 0; i < 10_000 && ctx.Err() == nil; i++ {
		asked := r.now()
		if err := s.TryAcquire(ctx, 20*time.Second); err != nil {
			if ctx.Err() == nil && !errors.Is(err, sdk.ErrLockTimeout) && !errors.Is(err, sdk.ErrLockLost) {
				t.Logf("%s: acquire: %v", worker, err)
			}
			continue
		}
		g := check.PermitGrant{Lock: semPath, Node: s.Node(), Worker: worker, Token: s.Token(), Asked: asked}
		iv := check.Interval{Lock: semPath, Node: s.Node(), Worker: worker, Mode: api.LockPermit, Start: r.now()}
		timer := time.NewTimer(hold)
		select {
		case <-timer.C:
		case <-s.Context().Done():
		case <-ctx.Done():
		}
		timer.Stop()
		iv.End = r.now()
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if s.Release(rctx) == nil {
			g.Released = r.now()
		}
		cancel()
		r.mu.Lock()
		r.ivs, r.grants = append(r.ivs, iv), append(r.grants, g)
		r.byWorker[worker]++
		r.mu.Unlock()
	}
}

// poll reads the semaphore's queue from the service until ctx ends and
// fails t if more than N permits ever hold.
func (r *semRecorder) poll(ctx context.Context, t *testing.T, cl *sdk.Client) {
	for i := 0; i < maxSemQueueObs && ctx.Err() == nil; i++ {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		q, err := cl.LockQueue(qctx, semPath)
		cancel()
		if err == nil {
			held := 0
			for _, e := range q.Entries {
				if e.Held {
					held++
				}
			}
			if held > semPermits || q.InUse > semPermits || (q.Permits != 0 && q.Permits != semPermits) {
				t.Errorf("queue at index %d: %d held, in use %d of %d: %+v", q.Index, held, q.InUse, q.Permits, q.Entries)
			}
			r.mu.Lock()
			r.maxInUse, r.polls = max(r.maxInUse, held), r.polls+1
			r.mu.Unlock()
		}
		time.Sleep(semQueuePoll)
	}
}

// TestSemaphoreThirtyContenders: a semaphore of 3 permits and 30
// contenders (29 SDK clients, each its own session, and one lockctl lock
// --permits 3 process) through a holder pause (the lockctl process
// SIGSTOPped while it holds, past its lease: the cell frees its permit)
// and a kill of the cell's leader. Never more than 3 hold: not in the
// service's queue as polled, not in the clients' live spans (checker s of
// the fault suite); tokens rise; every contender gets a permit; the
// paused holder, resumed, finds its permit lost and stops its command.
func TestSemaphoreThirtyContenders(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Lease: semLease})
	lockctl := cluster.Build(t, "./ctl/cmd/lockctl")
	holder := startLineProc(t, "lockctl-holder", lockctl, "--endpoints", strings.Join(c.Endpoints(), ","), "lock", semPath, "--permits", fmt.Sprint(semPermits),
		"--", "sh", "-c", `echo "token=$LOCK_TOKEN"; exec sleep 600`)
	holderToken := field(holder.await("token=", 30*time.Second), "token")

	rec := &semRecorder{t0: time.Now(), byWorker: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for k := 0; k < semContenders-1; k++ {
		s := newSDK(t, c, semLease).NewSemaphore(semPath, semPermits)
		hold := time.Duration(100+10*k) * time.Millisecond
		wg.Go(func() { rec.contend(ctx, t, s, fmt.Sprintf("c%d", k), hold) })
	}
	observer := newSDK(t, c, semLease)
	wg.Go(func() { rec.poll(ctx, t, observer) })

	// The holder pause: SIGSTOP past its lease; the cell expires its
	// session and its permit goes to a waiter.
	time.Sleep(2 * time.Second)
	holder.signal(syscall.SIGSTOP)
	waitTokenGone(t, observer, holderToken)
	t.Logf("the paused holder's permit (token %s) was freed", holderToken)

	// The leader kill, while 29 contend.
	leaderKill(t, c)
	time.Sleep(8 * time.Second)

	// Resumed, the holder finds its permit lost: lockctl stops its
	// command and exits non-zero.
	holder.signal(syscall.SIGCONT)
	if err := holder.wait(20 * time.Second); err == nil {
		t.Error("the paused holder exited 0 after its permit was lost")
	}
	cancel()
	wg.Wait()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	n, vs := check.CheckSemaphores(rec.ivs, rec.grants, map[string]int{semPath: semPermits}, sdk.DriftMargin(semLease))
	for _, v := range vs {
		t.Errorf("checker s: %s", v.Detail)
	}
	for k := 0; k < semContenders-1; k++ {
		if w := fmt.Sprintf("c%d", k); rec.byWorker[w] == 0 {
			t.Errorf("contender %s never held a permit", w)
		}
	}
	if rec.maxInUse != semPermits || rec.polls < 20 {
		t.Errorf("the queue showed at most %d holders over %d polls, want %d", rec.maxInUse, rec.polls, semPermits)
	}
	t.Logf("%d permits granted, %d records checked, %d queue polls, at most %d holding", len(rec.grants), n, rec.polls, rec.maxInUse)
}

// waitTokenGone waits until no lock node of the semaphore has token (its
// holder's session expired), at most 30 s.
func waitTokenGone(t *testing.T, cl *sdk.Client, token string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		q, err := cl.LockQueue(ctx, semPath)
		cancel()
		gone := err == nil
		for _, e := range q.Entries {
			gone = gone && fmt.Sprint(e.Token) != token
		}
		if gone {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the paused holder's permit (token %s) is still in the queue after 30 s", token)
}
