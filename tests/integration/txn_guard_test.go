package integration_test

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestGuardedWriteAfterExpiry, on real processes: a lockctl holder's
// token guards a write (lockctl txn --if 'holds …'); the holder is paused
// (SIGSTOP) past its lease, its session expires and an SDK Mutex takes
// the lock; the guarded write carrying the paused holder's token is then
// refused by the cell (condition_failed, lockctl exits non-zero) and the
// value is unchanged, while the new holder's Mutex.Guard writes. A txn
// spanning two cells' prefixes would be refused with both named
// (server/httpapi TestTxnRoute); here every path is on /demo's cell.
func TestGuardedWriteAfterExpiry(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("pauses a holder past its lease")
	}
	const (
		lease = 3 * time.Second
		lock  = "/demo/guard/job"
		value = "/demo/guard/value"
	)
	c := cluster.Start(t, cluster.Options{Lease: lease})
	lockctl := cluster.Build(t, "./ctl/cmd/lockctl")
	eps := strings.Join(c.Endpoints(), ",")
	cl := newSDK(t, c, lease)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	holder := startLineProc(t, "holder", lockctl, "--endpoints", eps, "--direct", "lock", lock,
		"--", "sh", "-c", `echo "token=$LOCK_TOKEN"; exec sleep 600`)
	oldToken, err := strconv.ParseUint(field(holder.await("token=", time.Minute), "token"), 10, 64)
	must(t, err)
	guarded := func(token uint64, v string) (string, error) {
		out, err := exec.CommandContext(ctx, lockctl, "--endpoints", eps, "--direct", "txn",
			"--if", "holds "+lock+" "+strconv.FormatUint(token, 10), "--then", "put "+value+" "+v).CombinedOutput()
		return string(out), err
	}
	if out, err := guarded(oldToken, "holder-1"); err != nil {
		t.Fatalf("the holder's guarded write: %v\n%s", err, out)
	}

	holder.signal(syscall.SIGSTOP)
	paused := time.Now()
	m := cl.NewMutex(lock)
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("the lock after the holder's pause: %v", err)
	}
	t.Logf("taken %v after the holder's pause, token %d (the paused holder's %d)", time.Since(paused).Round(time.Millisecond), m.Token(), oldToken)
	if m.Token() <= oldToken {
		t.Fatalf("new token %d not above the paused holder's %d", m.Token(), oldToken)
	}

	out, err := guarded(oldToken, "holder-2")
	if err == nil || !strings.Contains(out, string(api.CodeConditionFailed)) {
		t.Fatalf("the paused holder's guarded write after its expiry: %v\n%s", err, out)
	}
	_, err = cl.Txn(ctx).If(sdk.IfHolds(lock, oldToken)).Then(sdk.PutOp(value, []byte("holder-3"))).Commit(ctx)
	var te *sdk.TxnError
	if !errors.Is(err, api.ErrConditionFailed) || !errors.As(err, &te) || te.Failure.Index != 0 {
		t.Fatalf("the SDK txn with the old token: %v", err)
	}
	if n, err := cl.Get(ctx, value); err != nil || string(n.Value) != "holder-1" {
		t.Fatalf("value %q (%v) after the refused writes, want holder-1", n.Value, err)
	}
	if _, err := m.Guard(ctx, []api.TxnOp{sdk.PutOp(value, []byte("new-holder"))}); err != nil {
		t.Fatalf("the new holder's Guard: %v", err)
	}
	holder.signal(syscall.SIGCONT) // it finds its lock lost and exits
	if n, err := cl.Get(ctx, value); err != nil || string(n.Value) != "new-holder" {
		t.Fatalf("value %q (%v), want the new holder's", n.Value, err)
	}
	must(t, m.Unlock(ctx))
}
