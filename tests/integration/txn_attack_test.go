package integration_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestAttackTxnCacheFence, on real processes: readers cache two values
// and a node (two directly, two through a lockproxy's shared cache); a
// transaction writes both values, and in the last round deletes the
// cached node. Once Commit returns, no reader may read an old value or
// the deleted node, whoever sent the transaction (an uncached operator,
// or a reader behind the proxy writing what it caches), and a watch on a
// written path fires once per transaction.
func TestAttackTxnCacheFence(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	startProxies(t, c, 1)
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	const (
		a    = "/demo/txnfence/a"
		b    = "/demo/txnfence/b"
		gone = "/demo/txnfence/gone"
	)
	for _, p := range []string{a, b, gone} {
		_, err := op.Put(ctx, p, []byte("v0"), sdk.MakeParents())
		must(t, err)
	}
	readers := []*sdk.Client{cachingClient(t, c), cachingClient(t, c), proxyCachingClient(t, c), proxyCachingClient(t, c)}
	warm := func(want string) {
		for _, r := range readers {
			warmCache(ctx, t, r, a, want)
			warmCache(ctx, t, r, b, want)
		}
	}
	warm("v0")
	for _, r := range readers {
		warmCache(ctx, t, r, gone, "v0")
	}
	_, _, ch, err := readers[3].GetW(ctx, a)
	must(t, err)
	writers := []*sdk.Client{op, readers[2], op}
	for round := 1; round <= len(writers); round++ {
		want := fmt.Sprintf("v%d", round)
		cur, err := op.Get(ctx, a)
		must(t, err)
		txn := writers[round-1].Txn(ctx).If(sdk.IfVersion(a, cur.Version)).Then(sdk.PutOp(a, []byte(want)), sdk.PutOp(b, []byte(want)))
		if round == len(writers) {
			txn.Then(sdk.DeleteOp(gone))
		}
		res, err := txn.Commit(ctx)
		if err != nil || len(res.Nodes) < 2 {
			t.Fatalf("round %d: txn: %+v %v", round, res, err)
		}
		// The txn has returned: no cache may serve an old value.
		for i, r := range readers {
			for _, p := range []string{a, b} {
				n, err := r.Get(ctx, p)
				must(t, err)
				if string(n.Value) != want {
					t.Fatalf("round %d: reader %d read %s = %q after the txn writing %q returned: a stale cached value", round, i, p, n.Value, want)
				}
			}
		}
		select {
		case ev := <-ch:
			if ev.Type != api.EventDataChanged || ev.Path != a {
				t.Fatalf("round %d: watch event %+v", round, ev)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: no watch event for the txn's write of %s", round, a)
		}
		_, _, ch, err = readers[3].GetW(ctx, a)
		must(t, err)
		warm(want)
	}
	for i, r := range readers {
		if n, err := r.Get(ctx, gone); !errors.Is(err, api.ErrNoNode) {
			t.Fatalf("reader %d read %s (%q, %v) after the txn deleting it returned: a stale cached node", i, gone, n.Value, err)
		}
		t.Logf("reader %d: %+v", i, r.CacheStats())
	}
}
