package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// The etcd gateway's leases and Lock service on real processes (three
// lockds, a lockproxy with --etcd-listen, tokens required), with etcd's
// own Go client: docs/etcd.md, "Lease" and "Lock".

// leaseLockTimeout bounds each subtest.
const leaseLockTimeout = 2 * time.Minute

// leasePollRounds bounds a poll for a lease's keys to go (250 ms each:
// far past any TTL here, plus the cell's expiry).
const leasePollRounds = 240

func TestEtcdLeaseLock(t *testing.T) {
	g := startEtcdGW(t, etcdTokens)
	cli := g.client(t)
	g.waitGateway(t, cli)
	t.Run("lifecycle", func(t *testing.T) { leaseLifecycle(t, cli) })
	t.Run("expiry", func(t *testing.T) { leaseExpiry(t, cli) })
	t.Run("lock exclusion", func(t *testing.T) { lockExclusion(t, cli, g.client(t)) })
	t.Run("other tenant", func(t *testing.T) { leaseOtherTenant(t, g, cli) })
}

// leaseLifecycle: grant, a key with the lease, KeepAlive, TimeToLive with
// keys, revoke (the key goes).
func leaseLifecycle(t *testing.T, cli *clientv3.Client) {
	ctx, cancel := ctxFor(leaseLockTimeout)
	defer cancel()
	gr, err := cli.Grant(ctx, 5)
	must(t, err)
	if gr.TTL != 5 {
		t.Fatalf("granted TTL %d, want 5", gr.TTL)
	}
	_, err = cli.Put(ctx, "/demo/lease/a", "v", clientv3.WithLease(gr.ID))
	must(t, err)
	ka, err := cli.KeepAliveOnce(ctx, gr.ID)
	must(t, err)
	if ka.TTL < 1 || ka.TTL > 5 {
		t.Fatalf("KeepAlive TTL %d, want 1..5 (never more than granted)", ka.TTL)
	}
	ttl, err := cli.TimeToLive(ctx, gr.ID, clientv3.WithAttachedKeys())
	must(t, err)
	if ttl.GrantedTTL != 5 || ttl.TTL < 1 || ttl.TTL > 5 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != "/demo/lease/a" {
		t.Fatalf("TimeToLive: TTL %d granted %d keys %q", ttl.TTL, ttl.GrantedTTL, ttl.Keys)
	}
	get, err := cli.Get(ctx, "/demo/lease/a")
	must(t, err)
	if len(get.Kvs) != 1 || clientv3.LeaseID(get.Kvs[0].Lease) != gr.ID {
		t.Fatalf("the key's lease: %+v, want %x", get.Kvs, gr.ID)
	}
	ls, err := cli.Leases(ctx)
	must(t, err)
	if !hasLease(ls.Leases, gr.ID) {
		t.Fatalf("Leases %v lacks %x", ls.Leases, gr.ID)
	}
	_, err = cli.Revoke(ctx, gr.ID)
	must(t, err)
	get, err = cli.Get(ctx, "/demo/lease/a")
	must(t, err)
	if len(get.Kvs) != 0 {
		t.Fatalf("key of a revoked lease still there: %+v", get.Kvs)
	}
	if r, err := cli.TimeToLive(ctx, gr.ID); err != nil || r.TTL != -1 {
		t.Fatalf("TimeToLive of a revoked lease: %+v %v, want TTL -1", r, err)
	}
}

func hasLease(ls []clientv3.LeaseStatus, id clientv3.LeaseID) bool {
	for _, l := range ls {
		if l.ID == id {
			return true
		}
	}
	return false
}

// leaseExpiry: a key whose lease is kept alive stays through two of its
// TTLs; one whose client stops keeping alive goes. The kept lease's TTL
// (4 s) is longer than the dropped one's (2 s), so that a loaded machine
// stalling the client's renewals for a second or two does not end it.
func leaseExpiry(t *testing.T, cli *clientv3.Client) {
	ctx, cancel := ctxFor(leaseLockTimeout)
	defer cancel()
	const keptTTL = 4
	granted := time.Now()
	kept, err := cli.Grant(ctx, keptTTL)
	must(t, err)
	dropped, err := cli.Grant(ctx, 2)
	must(t, err)
	_, err = cli.Put(ctx, "/demo/lease/kept", "v", clientv3.WithLease(kept.ID))
	must(t, err)
	_, err = cli.Put(ctx, "/demo/lease/dropped", "v", clientv3.WithLease(dropped.ID))
	must(t, err)
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	ch, err := cli.KeepAlive(kctx, kept.ID)
	must(t, err)
	for i := 0; ; i++ {
		get, err := cli.Get(ctx, "/demo/lease/dropped")
		must(t, err)
		if len(get.Kvs) == 0 {
			break
		}
		if i == leasePollRounds {
			t.Fatal("the key of a lease nobody keeps alive never went")
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The kept lease has had KeepAlives all along: drain them until two of
	// its TTLs have passed, then its key must still be there.
	for i := 0; time.Since(granted) < 2*keptTTL*time.Second || i < 3; i++ {
		if i == leasePollRounds {
			t.Fatalf("%d KeepAlive replies within %v", i, time.Since(granted))
		}
		select {
		case r, ok := <-ch:
			if !ok || r.TTL <= 0 {
				t.Fatalf("kept lease's KeepAlive channel: %+v %v", r, ok)
			}
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	get, err := cli.Get(ctx, "/demo/lease/kept")
	must(t, err)
	if len(get.Kvs) != 1 {
		t.Fatal("the key of a lease kept alive went")
	}
	kcancel()
	_, err = cli.Revoke(ctx, kept.ID)
	must(t, err)
}

// lockExclusion: two clients Lock one name: the second is granted only
// after the first Unlocks, with a higher create revision (its fencing
// token); a holder whose lease is revoked lets the waiter in.
func lockExclusion(t *testing.T, c1, c2 *clientv3.Client) {
	ctx, cancel := ctxFor(leaseLockTimeout)
	defer cancel()
	l1 := keptLease(t, ctx, c1)
	l2 := keptLease(t, ctx, c2)
	name := []byte("/demo/elock")
	first, err := v3lockpb.NewLockClient(c1.ActiveConnection()).Lock(ctx, &v3lockpb.LockRequest{Name: name, Lease: int64(l1)})
	must(t, err)
	rev1 := createRevision(t, ctx, c1, first.Key)
	second := lockAsync(ctx, c2, name, l2)
	waitQueue(t, ctx, c1, "/demo/elock/", 2)
	select {
	case r := <-second:
		t.Fatalf("the second Lock answered while the first holds: %v %v", r.resp, r.err)
	case <-time.After(time.Second):
	}
	_, err = v3lockpb.NewLockClient(c1.ActiveConnection()).Unlock(ctx, &v3lockpb.UnlockRequest{Key: first.Key})
	must(t, err)
	r := <-second
	must(t, r.err)
	rev2 := createRevision(t, ctx, c2, r.resp.Key)
	if rev2 <= rev1 || r.resp.Header.Revision < rev2 {
		t.Fatalf("tokens: first %d, second %d (header %d): want rising, header >= grant", rev1, rev2, r.resp.Header.Revision)
	}
	// The holder's lease revoked: the waiter gets in.
	third := lockAsync(ctx, c1, name, l1)
	waitQueue(t, ctx, c1, "/demo/elock/", 2)
	_, err = c2.Revoke(ctx, l2)
	must(t, err)
	r = <-third
	must(t, r.err)
	if rev3 := createRevision(t, ctx, c1, r.resp.Key); rev3 <= rev2 {
		t.Fatalf("token after the revoke %d, not above %d", rev3, rev2)
	}
	_, err = c1.Revoke(ctx, l1)
	must(t, err)
}

type lockResult struct {
	resp *v3lockpb.LockResponse
	err  error
}

func lockAsync(ctx context.Context, c *clientv3.Client, name []byte, l clientv3.LeaseID) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		r, err := v3lockpb.NewLockClient(c.ActiveConnection()).Lock(ctx, &v3lockpb.LockRequest{Name: name, Lease: int64(l)})
		ch <- lockResult{r, err}
	}()
	return ch
}

// keptLease grants a 10 s lease kept alive until ctx ends.
func keptLease(t *testing.T, ctx context.Context, c *clientv3.Client) clientv3.LeaseID {
	t.Helper()
	gr, err := c.Grant(ctx, 10)
	must(t, err)
	ch, err := c.KeepAlive(ctx, gr.ID)
	must(t, err)
	go func() {
		for range ch { //nolint:revive // drain: the channel closes with ctx or the lease
		}
	}()
	return gr.ID
}

func createRevision(t *testing.T, ctx context.Context, c *clientv3.Client, key []byte) int64 {
	t.Helper()
	get, err := c.Get(ctx, string(key))
	must(t, err)
	if len(get.Kvs) != 1 {
		t.Fatalf("lock key %s: %d kvs", key, len(get.Kvs))
	}
	return get.Kvs[0].CreateRevision
}

// waitQueue waits until n keys lie under prefix.
func waitQueue(t *testing.T, ctx context.Context, c *clientv3.Client, prefix string, n int64) {
	t.Helper()
	for i := 0; ; i++ {
		get, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		must(t, err)
		if get.Count == n {
			return
		}
		if i == leasePollRounds {
			t.Fatalf("%s: %d keys, want %d", prefix, get.Count, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaseOtherTenant: another tenant's lease id grants nothing: a write,
// KeepAlive, TimeToLive and Revoke with it answer lease not found.
func leaseOtherTenant(t *testing.T, g *etcdGW, cli *clientv3.Client) {
	ctx, cancel := ctxFor(leaseLockTimeout)
	defer cancel()
	other := otherTenantClient(t, g)
	gr, err := cli.Grant(ctx, 30)
	must(t, err)
	if _, err := other.Put(ctx, "/demo/lease/other", "v", clientv3.WithLease(gr.ID)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("put with another tenant's lease: %v", err)
	}
	if _, err := other.KeepAliveOnce(ctx, gr.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("KeepAlive of another tenant's lease: %v", err)
	}
	if r, err := other.TimeToLive(ctx, gr.ID); err != nil || r.TTL != -1 {
		t.Fatalf("TimeToLive of another tenant's lease: %+v %v", r, err)
	}
	if _, err := other.Revoke(ctx, gr.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("Revoke of another tenant's lease: %v", err)
	}
	if r, err := cli.TimeToLive(ctx, gr.ID); err != nil || r.TTL <= 0 {
		t.Fatalf("the owner's lease after the other tenant's tries: %+v %v", r, err)
	}
	_, err = cli.Revoke(ctx, gr.ID)
	must(t, err)
}

// otherTenantClient is an etcd client of a second tenant granted the
// same prefixes.
func otherTenantClient(t *testing.T, g *etcdGW) *clientv3.Client {
	t.Helper()
	ctx, cancel := ctxFor(etcdSetupTimeout)
	defer cancel()
	adm, err := sdk.New(ctx, sdk.Config{Endpoints: g.c.Endpoints(), AuthToken: etcdAdminToken, Direct: true})
	must(t, err)
	defer adm.Close()
	roles := []api.Role{api.RoleRead, api.RoleWrite, api.RoleLock}
	tn := api.Tenant{Name: "etcd-other", Grants: []api.Grant{{Prefix: "/demo", Roles: roles}}}
	resp, err := adm.PutTenant(ctx, tn, true)
	must(t, err)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{g.addr}, DialTimeout: etcdDialTimeout, Username: "other", Password: resp.Token,
	})
	must(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
