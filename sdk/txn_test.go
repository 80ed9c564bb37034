package sdk

import (
	"errors"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestTxnBuilder: a transaction commits all its writes when its
// conditions hold, and none when one fails: the error names it
// (errors.Is on api.ErrConditionFailed, or the failed write's code;
// errors.As gives the index).
func TestTxnBuilder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c := newTestClient(t, fc, nil)
		res, err := c.Txn(ctx).If(IfMissing("/demo/a")).Then(CreateOp("/demo/a", []byte("1")), PutOp("/demo/cfg", []byte("v"))).Commit(ctx)
		if err != nil || len(res.Nodes) != 2 || res.Nodes[0].Path != "/demo/a" || res.Index == 0 {
			t.Fatalf("commit: %+v, %v", res, err)
		}
		_, err = c.Txn(ctx).If(IfExists("/demo/cfg"), IfMissing("/demo/a")).Then(PutOp("/demo/cfg", []byte("w"))).Commit(ctx)
		var te *TxnError
		if !errors.Is(err, api.ErrConditionFailed) || !errors.As(err, &te) || te.Failure.Kind != api.TxnFailedIf || te.Failure.Index != 1 {
			t.Fatalf("failed condition: %v", err)
		}
		_, err = c.Txn(ctx).Then(PutOp("/demo/cfg", []byte("w")), CreateOp("/demo/a", nil)).Commit(ctx)
		if !errors.Is(err, api.ErrNodeExists) || !errors.As(err, &te) || te.Failure.Kind != api.TxnFailedThen || te.Failure.Index != 1 {
			t.Fatalf("failed write: %v", err)
		}
		if n, err := c.Get(ctx, "/demo/cfg"); err != nil || string(n.Value) != "v" || n.Version != 1 {
			t.Fatalf("a refused txn changed /demo/cfg: %+v, %v", n, err)
		}
		if _, err := c.Txn(ctx).Commit(ctx); !errors.Is(err, api.ErrBadRequest) {
			t.Fatalf("a txn without writes: %v", err)
		}
	})
}

// TestMutexGuard: Guard writes while the mutex's token holds; once the
// holder's session expired and another took the lock, the old holder's
// guarded write is refused (by the client, which saw the loss, or by the
// cell's token check) and the value stays the new holder's.
func TestMutexGuard(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		ca, cb := newTestClient(t, fc, nil), newTestClient(t, fc, nil)
		a, b := ca.NewMutex(lockDir), cb.NewMutex(lockDir)
		if _, err := a.Guard(ctx, []api.TxnOp{PutOp("/demo/val", []byte("a"))}); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Guard before Lock: %v", err)
		}
		if err := a.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		oldToken := a.Token()
		if _, err := a.Guard(ctx, []api.TxnOp{PutOp("/demo/val", []byte("a"))}); err != nil {
			t.Fatalf("holder's Guard: %v", err)
		}
		fc.expire(sessionOf(t, ca).ID())
		if err := b.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Guard(ctx, []api.TxnOp{PutOp("/demo/val", []byte("b"))}); err != nil {
			t.Fatalf("new holder's Guard: %v", err)
		}
		if _, err := a.Guard(ctx, []api.TxnOp{PutOp("/demo/val", []byte("a2"))}); !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrLockLost) {
			t.Fatalf("expired holder's Guard: %v", err)
		}
		// The cell's own check, whatever the client believes: the old
		// token no longer holds.
		_, err := cb.Txn(ctx).If(IfHolds(lockDir, oldToken)).Then(PutOp("/demo/val", []byte("a3"))).Commit(ctx)
		if !errors.Is(err, api.ErrConditionFailed) {
			t.Fatalf("old token's txn: %v", err)
		}
		if n, err := cb.Get(ctx, "/demo/val"); err != nil || string(n.Value) != "b" {
			t.Fatalf("value %q (%v), want the new holder's", n.Value, err)
		}
	})
}
