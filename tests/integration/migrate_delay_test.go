package integration_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// TestMoveKeepsLocksDelayed (issue 23, finding 7): a lock held when its
// prefix moves is granted on the new cell to nobody before its holder's
// lease plus its lock-delay may have run (the seal takes it from a holder
// that may not know yet): right after the move the new cell shows the
// lock in delay, a TryLock is refused, and the waiter is granted only
// once the delay has ended; a lock-delay in force at the seal moves too.
func TestMoveKeepsLocksDelayed(t *testing.T) {
	t.Parallel()
	c, admin := manyCells(t)
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	_, err := admin.AssignPrefix(ctx, "/mv", "demo")
	must(t, err)
	const lease, lockDelay = 3 * time.Second, time.Second
	holder, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), RequestTimeout: 5 * time.Second, Lease: lease})
	must(t, err)
	defer holder.Close()
	m := holder.NewMutex("/mv/lock", sdk.WithLockDelay(lockDelay))
	must(t, m.Lock(ctx))
	held := m.Token()
	// A second lock whose holder is gone: in lock-delay at the seal.
	gone, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), RequestTimeout: 5 * time.Second, Lease: lease})
	must(t, err)
	g := gone.NewMutex("/mv/gone", sdk.WithLockDelay(20*time.Second))
	must(t, g.Lock(ctx))
	must(t, gone.Close()) // a close while holding: an unclean release
	q, err := admin.LockQueue(ctx, "/mv/gone")
	must(t, err)
	if q.Delay == nil {
		t.Fatalf("/mv/gone not in lock-delay after its holder closed: %+v", q)
	}

	res, err := admin.MovePrefix(ctx, "/mv", "cell3", nil)
	must(t, err)
	moved := time.Now()
	t.Logf("moved /mv to cell3: writes refused for %v", res.Refusing.Round(time.Millisecond))
	q, err = admin.LockQueue(ctx, "/mv/lock")
	must(t, err)
	if q.Delay == nil {
		t.Fatalf("right after the move the new cell shows no lock-delay on a lock held at the seal: %+v", q)
	}
	if want := (lease + lockDelay).Milliseconds(); q.Delay.MS < want {
		t.Errorf("the moved delay is %d ms, want at least the holder's lease plus its lock-delay, %d ms", q.Delay.MS, want)
	}
	t.Logf("on cell3 /mv/lock is in delay: %+v", *q.Delay)
	if qg, err := admin.LockQueue(ctx, "/mv/gone"); err != nil || qg.Delay == nil || qg.Delay.MS < 20_000 {
		t.Errorf("the lock-delay in force at the seal did not move: %+v %v", qg, err)
	}

	other := newSDKClient(t, c)
	w := other.NewMutex("/mv/lock")
	if err := w.TryLock(ctx, 300*time.Millisecond); !errors.Is(err, sdk.ErrLockTimeout) {
		t.Fatalf("a TryLock right after the move: %v, want not granted (lock-delay)", err)
	}
	must(t, w.Lock(ctx))
	granted := time.Since(moved)
	after, err := admin.LockQueue(ctx, "/mv/lock")
	must(t, err)
	if after.Delay != nil {
		t.Errorf("granted while the queue still shows the delay: %+v", *after.Delay)
	}
	if api.TokenEpoch(w.Token()) <= api.TokenEpoch(held) {
		t.Errorf("the new holder's token %d is not under a newer epoch than the old holder's %d", w.Token(), held)
	}
	t.Logf("the waiter on cell3 was granted %v after the move (the delay: %d ms from the new cell's first serving entry)", granted.Round(time.Millisecond), q.Delay.MS)
}

// TestAbortedMoveKeepsLocksDelayed (issue 23, attack review 3): the seal
// takes a held lock from its holder, which may not know for up to its
// lease; when the move is then aborted, the old cell unseals and grants
// that lock to nobody before the holder's lease plus its lock-delay may
// have run, timed from the unseal. A build with mutant
// lockd_broken_abortdelay (the unseal starts no delay) fails it.
func TestAbortedMoveKeepsLocksDelayed(t *testing.T) {
	t.Parallel()
	c, admin := manyCells(t)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	_, err := admin.AssignPrefix(ctx, "/abrt", "demo")
	must(t, err)
	cl := c.NewClient()
	const lease, lockDelay = 10 * time.Second, 20 * time.Second
	lockReq := func(s *session) api.CreateRequest {
		return api.CreateRequest{WriteHeader: s.header(), Path: "/abrt/job/w-", Ephemeral: true, Sequential: true,
			Lock: api.LockExclusive, MakeParents: true, LockDelayMS: lockDelay.Milliseconds()}
	}
	// The holder makes no KeepAlive after the open: cut off from its
	// replies, it acts on the lock for its lease.
	a := openSession(t, cl, "demo", lease)
	var first api.CreateResponse
	err = do(cl, api.RouteCreate, lockReq(a), &first)
	for i := 0; i < 50 && isCode(err, api.CodeWrongCell); i++ { // demo adopts the new prefix soon after the assign
		time.Sleep(100 * time.Millisecond)
		err = do(cl, api.RouteCreate, lockReq(a), &first)
	}
	must(t, err)
	if first.WaitFor != "" {
		t.Fatalf("first lock waits for %q", first.WaitFor)
	}
	s := stepper{t: t, cl: c.NewClient(), prefix: "/abrt"}
	_, seal := s.beginAndSeal("driver-A")
	must(t, admin.AbortMove(ctx, "/abrt"))
	aborted := time.Now()
	t.Logf("sealed at index %d (%d nodes), move aborted", seal.Index, seal.Count)

	var q api.LockQueueResponse
	mustDo(t, cl, api.RouteLockQueue, api.LockQueueRequest{Path: "/abrt/job"}, &q)
	if q.Delay == nil {
		t.Fatalf("after the aborted move /abrt/job shows no lock-delay: %+v", q)
	}
	if want := (lease + lockDelay).Milliseconds(); q.Delay.MS < want {
		t.Errorf("the delay after the abort is %d ms, want at least the holder's lease plus its lock-delay, %d ms", q.Delay.MS, want)
	}
	b := openSession(t, cl, "demo", lease)
	b.keepAlive(time.Second)
	defer b.stop()
	var second api.CreateResponse
	mustDo(t, cl, api.RouteCreate, lockReq(b), &second)
	if second.WaitFor == "" {
		t.Fatalf("after the aborted move %s was granted at once (token %d), %v after the abort, while the old holder's lease may run",
			second.Node.Path, second.Token, time.Since(aborted).Round(time.Millisecond))
	}
	t.Logf("after the abort /abrt/job is in delay %+v; the new lock %s waits for %s", *q.Delay, second.Node.Path, second.WaitFor)
}
