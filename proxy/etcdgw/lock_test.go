package etcdgw

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
)

func lockClient(c *clientv3.Client) v3lockpb.LockClient {
	return v3lockpb.NewLockClient(c.ActiveConnection())
}

func lockReq(name string, lease clientv3.LeaseID) *v3lockpb.LockRequest {
	return &v3lockpb.LockRequest{Name: []byte(name), Lease: int64(lease)}
}

// TestLockWaitsForGrant: a second Lock of a held name answers only after
// the holder unlocks; its key's revision is above the first's; a Lock
// whose caller gives up leaves no node queued.
func TestLockWaitsForGrant(t *testing.T) {
	b := newLFBackend()
	_, cs := lfGateway(t, b, "alice", "bob")
	ctx := context.Background()
	la, _ := cs[0].Grant(ctx, 30)
	lb, _ := cs[1].Grant(ctx, 30)
	first, err := lockClient(cs[0]).Lock(ctx, lockReq("/demo/m", la.ID))
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		r   *v3lockpb.LockResponse
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := lockClient(cs[1]).Lock(ctx, lockReq("/demo/m", lb.ID))
		done <- res{r, err}
	}()
	for i := 0; b.nodeCount() < 2; i++ { // bob's node is queued
		if i > 500 {
			t.Fatal("bob's lock node never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("bob's Lock answered while alice holds: %v %v", r.r, r.err)
	case <-time.After(3 * lockPollInterval):
	}
	if _, err := lockClient(cs[0]).Unlock(ctx, &v3lockpb.UnlockRequest{Key: first.Key}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if string(r.r.Key) <= string(first.Key) || r.r.Header.Revision <= first.Header.Revision {
		t.Fatalf("second grant %s@%d after first %s@%d", r.r.Key, r.r.Header.Revision, first.Key, first.Header.Revision)
	}
	// A caller that gives up: its node goes.
	cctx, cancel := context.WithTimeout(ctx, 3*lockPollInterval)
	defer cancel()
	if _, err := lockClient(cs[0]).Lock(cctx, lockReq("/demo/m", la.ID)); err == nil {
		t.Fatal("alice got the lock bob holds")
	}
	for i := 0; b.nodeCount() != 1; i++ {
		if i > 500 {
			t.Fatalf("abandoned lock node left: %d nodes", b.nodeCount())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Unlock of a key that is not a lock node is refused.
	if _, err := lockClient(cs[0]).Unlock(ctx, &v3lockpb.UnlockRequest{Key: []byte("/demo/nope")}); err != nil {
		t.Fatalf("unlock of a missing key: %v (etcd: fine)", err)
	}
	if _, err := lockClient(cs[0]).Lock(ctx, lockReq("/demo/m2", 0)); err == nil {
		t.Fatal("Lock without a lease answered")
	}
}

// TestLockSameLeaseOnce: a second Lock of one name with one lease is the
// same acquisition (etcd's rule): the same key, no second node.
func TestLockSameLeaseOnce(t *testing.T) {
	b := newLFBackend()
	_, cs := lfGateway(t, b, "alice")
	ctx := context.Background()
	l, _ := cs[0].Grant(ctx, 30)
	first, err := lockClient(cs[0]).Lock(ctx, lockReq("/demo/once/", l.ID))
	if err != nil {
		t.Fatal(err)
	}
	again, err := lockClient(cs[0]).Lock(ctx, lockReq("/demo/once", l.ID))
	if err != nil || string(again.Key) != string(first.Key) || b.nodeCount() != 1 {
		t.Fatalf("second Lock with the lease: %v %v (%d nodes), want key %s", again, err, b.nodeCount(), first.Key)
	}
}

// TestLockDelayPolls: a Lock in the lock's lock-delay (the cell names the
// directory to wait for) re-checks until granted, not waiting for the
// directory to go.
func TestLockDelayPolls(t *testing.T) {
	b := newLFBackend()
	b.delayed = 3
	_, cs := lfGateway(t, b, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, _ := cs[0].Grant(ctx, 30)
	r, err := lockClient(cs[0]).Lock(ctx, lockReq("/demo/delayed", l.ID))
	if err != nil || !strings.HasPrefix(string(r.Key), "/demo/delayed/w-") {
		t.Fatalf("Lock after a lock-delay: %v %v", r, err)
	}
	if b.delayed != 0 {
		t.Fatalf("granted with %d delayed re-checks left", b.delayed)
	}
}
