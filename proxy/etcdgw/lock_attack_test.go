package etcdgw

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// Regression tests of the attack review (session 34) on Lock.

// TestLockRetryAfterUnknownCreate: a Lock whose lock node's create had
// an unknown outcome (applied, answer lost) fails; the client's retry
// with the same lease is the same acquisition: it finds that node and
// is granted, instead of queueing a second node behind its own first
// and waiting for as long as the lease is kept alive.
func TestLockRetryAfterUnknownCreate(t *testing.T) {
	b := newLFBackend()
	_, cs := lfGateway(t, b, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	la, err := cs[0].Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.lostCreates = maxLockCreateAttempts
	b.mu.Unlock()
	if _, err := lockClient(cs[0]).Lock(ctx, lockReq("/demo/g", la.ID)); err == nil {
		t.Fatal("a Lock whose create outcome was unknown answered a grant")
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	r, err := lockClient(cs[0]).Lock(rctx, lockReq("/demo/g", la.ID))
	if err != nil {
		t.Fatalf("the retried Lock: %v (it queued behind its own lost node)", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var locks []string
	for p, n := range b.nodes {
		if n.Lock != api.LockNone && strings.HasPrefix(p, "/demo/g/") {
			locks = append(locks, p)
		}
	}
	if len(locks) != 1 || locks[0] != string(r.Key) {
		t.Fatalf("lock nodes %v, granted %s: want the one lost node, granted", locks, r.Key)
	}
}
