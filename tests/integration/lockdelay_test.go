package integration_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/sdk/fence"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestLockDelayAndTokenCheck, on real processes:
//
//   - a lockctl holder with --lock-delay is killed with kill -9: once its
//     lease runs out, its lock is in delay, and the next waiter is not
//     granted it before the delay's end (on one clock: the machine's, as
//     the leader stamped the release), even though the cell's leader is
//     killed in the middle of the delay;
//   - the token check answers valid for the current holder's token and
//     invalid for the killed holder's, after that fail-over;
//   - a clean Unlock hands over at once (no delay is ever shown);
//   - a delay out of range is refused with a clear error.
//
// A build with mutant lockd_broken_lockdelay (a new leader ends inherited
// delays at once) fails it.
func TestLockDelayAndTokenCheck(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills a holder and a leader")
	}
	const (
		lease = 3 * time.Second
		delay = 8 * time.Second
		lock  = "/demo/delay/job"
	)
	c := cluster.Start(t, cluster.Options{Lease: lease})
	lockctl := cluster.Build(t, "./ctl/cmd/lockctl")
	eps := strings.Join(c.Endpoints(), ",")
	cl := newSDK(t, c, lease)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	holder := startLineProc(t, "holder", lockctl, "--endpoints", eps, "--direct", "lock", lock, "--lock-delay", delay.String(),
		"--", "sh", "-c", `echo "token=$LOCK_TOKEN"; exec sleep 600`)
	oldToken, err := strconv.ParseUint(field(holder.await("token=", time.Minute), "token"), 10, 64)
	must(t, err)
	if r, err := cl.CheckToken(ctx, lock, oldToken); err != nil || !r.Valid {
		t.Fatalf("the holder's own token: %+v %v, want valid", r, err)
	}

	waiter := cl.NewMutex(lock)
	granted := make(chan time.Time, 1)
	go func() {
		if err := waiter.Lock(ctx); err != nil {
			t.Error(err)
		}
		granted <- time.Now()
	}()
	waitChildren(t, cl, lock, 2)

	killed := time.Now()
	holder.kill()
	// The lease runs out, the leader expires the session and the lock goes
	// into its delay.
	var q api.LockQueueResponse
	for q.Delay == nil {
		if ctx.Err() != nil {
			t.Fatal("the lock never went into its delay")
		}
		select {
		case at := <-granted:
			t.Fatalf("granted %v after the kill, with no delay shown", at.Sub(killed))
		case <-time.After(50 * time.Millisecond):
		}
		q, _ = cl.LockQueue(ctx, lock)
	}
	until := time.UnixMilli(q.Delay.UntilMS)
	t.Logf("in delay from the release at index %d: %v from %v after the kill, until %v after it",
		q.Delay.Since, time.Duration(q.Delay.MS)*time.Millisecond, time.UnixMilli(q.Delay.ReleasedAtMS).Sub(killed).Round(time.Millisecond), until.Sub(killed).Round(time.Millisecond))
	if q.Delay.MS != delay.Milliseconds() || len(q.Entries) != 1 || q.Entries[0].Held {
		t.Fatalf("queue in delay: %+v", q)
	}

	// Kill the cell's leader in the middle of the delay.
	time.Sleep(delay / 4)
	leader, _ := leaderKill(t, c)

	at := <-granted
	t.Logf("granted %v after the kill, %v after the delay's end (leader %d killed during it)",
		at.Sub(killed).Round(time.Millisecond), at.Sub(until).Round(time.Millisecond), leader)
	if at.Before(until) {
		t.Fatalf("granted %v before the lock-delay ended", until.Sub(at))
	}
	newToken := waiter.Token()
	if r, err := cl.CheckToken(ctx, lock, newToken); err != nil || !r.Valid || len(r.Holders) != 1 || r.Holders[0] != newToken {
		t.Fatalf("the new holder's token after the fail-over: %+v %v", r, err)
	}
	if r, err := cl.CheckToken(ctx, lock, oldToken); err != nil || r.Valid {
		t.Fatalf("the killed holder's token after the fail-over: %+v %v, want invalid", r, err)
	}
	// A resource that can only check, asking this cell through the SDK.
	var printed []uint64
	printer := func(token uint64) error {
		return fence.CheckThen(ctx, cl, lock, token, func() error { printed = append(printed, token); return nil })
	}
	if err := printer(oldToken); !errors.Is(err, fence.ErrNotHolder) {
		t.Fatalf("the check-only resource took the killed holder's token: %v", err)
	}
	must(t, printer(newToken))
	if len(printed) != 1 || printed[0] != newToken {
		t.Fatalf("printed for %v", printed)
	}
	must(t, c.Restart(leader))

	// A clean release hands over at once: the next waiter is granted with
	// no delay shown at any point.
	next := cl.NewMutex(lock, sdk.WithLockDelay(delay))
	nextGranted := make(chan error, 1)
	go func() { nextGranted <- next.Lock(ctx) }()
	waitChildren(t, cl, lock, 2)
	must(t, waiter.Unlock(ctx))
	must(t, <-nextGranted)
	if q, err := cl.LockQueue(ctx, lock); err != nil || q.Delay != nil {
		t.Fatalf("after a clean release: %+v %v, want no delay", q, err)
	}
	if r, err := cl.CheckToken(ctx, lock, newToken); err != nil || r.Valid {
		t.Fatalf("the released token: %+v %v, want invalid", r, err)
	}
	must(t, next.Unlock(ctx))

	// Out of range: refused before anything is created, by the SDK and by
	// the cell.
	for _, d := range []time.Duration{-time.Second, api.MaxLockDelay + time.Second} {
		err := cl.NewMutex("/demo/delay/bad", sdk.WithLockDelay(d)).Lock(ctx)
		if !errors.Is(err, sdk.ErrBadRequest) || !strings.Contains(err.Error(), "lock-delay") {
			t.Errorf("lock-delay %v: %v, want a bad_request naming the lock-delay", d, err)
		}
	}
	var resp api.CreateResponse
	err = do(c.NewClient(), api.RouteCreate, api.CreateRequest{Path: "/demo/delay/raw/w-", Ephemeral: true, Sequential: true,
		Lock: api.LockExclusive, MakeParents: true, LockDelayMS: api.MaxLockDelay.Milliseconds() + 1}, &resp)
	if !isCode(err, api.CodeBadRequest) || !strings.Contains(err.Error(), "lock-delay") {
		t.Errorf("raw create over the limit: %v", err)
	}
	out := startLineProc(t, "bad-lockctl", lockctl, "--endpoints", eps, "lock", lock, "--lock-delay", "2m", "--", "true")
	if err := out.wait(30 * time.Second); err == nil {
		t.Error("lockctl lock --lock-delay 2m succeeded")
	}
	if r, err := cl.CheckToken(ctx, lock, 0); !errors.Is(err, sdk.ErrBadRequest) {
		t.Errorf("checking token 0: %+v %v, want bad_request", r, err)
	}
}
