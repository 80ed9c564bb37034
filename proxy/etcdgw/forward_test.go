package etcdgw

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.uber.org/zap"
)

// twinBackend is an lfBackend seen by one of two gateways: its own name,
// both proxies in the directory, their gateways' addresses.
type twinBackend struct {
	*lfBackend
	name string
	mu   *sync.Mutex
	urls map[string]string // proxy name -> gateway URL
}

func (b twinBackend) Name() string { return b.name }
func (b twinBackend) Proxies() []api.ProxyInfo {
	return []api.ProxyInfo{{Name: "gw-a", APIAddr: "a:1"}, {Name: "gw-b", APIAddr: "b:1"}}
}
func (b twinBackend) PeerEtcdURL(_ context.Context, p api.ProxyInfo) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.urls[p.Name], nil
}

// TestLeaseAcrossGateways (mutant lockd_broken_etcd_noforward): a client
// given two gateways spreads its calls over both; a lease one granted is
// renewed, written with, locked with, asked about and revoked through
// the other, which sends each to the granting one. MemberList lists both.
func TestLeaseAcrossGateways(t *testing.T) {
	lf := newLFBackend()
	var mu sync.Mutex
	urls := map[string]string{}
	start := func(name string) *Gateway {
		g, err := Start(context.Background(), Config{Listen: "127.0.0.1:0", DefaultPrefix: "/demo/etcd"}, twinBackend{lfBackend: lf, name: name, mu: &mu, urls: urls})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		mu.Lock()
		urls[name] = "http://" + g.Addr()
		mu.Unlock()
		return g
	}
	a, b := start("gw-a"), start("gw-b")
	client := func(g *Gateway) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{g.Addr()}, DialTimeout: 5 * time.Second, Username: "u", Password: "tok", Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ca, cb := client(a), client(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := ca.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if ka, err := cb.KeepAliveOnce(ctx, lease.ID); err != nil || ka.TTL <= 0 {
		t.Fatalf("keepalive at the other gateway: %v %v", ka, err)
	}
	if _, err := cb.Put(ctx, "twin/k", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatalf("put with the lease at the other gateway: %v", err)
	}
	if r, err := cb.Get(ctx, "twin/k"); err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease != int64(lease.ID) {
		t.Fatalf("get at the other gateway of a key of the lease: %v %v, want its lease %x (asked of the granting gateway)", r, err, lease.ID)
	}
	ttl, err := cb.TimeToLive(ctx, lease.ID, clientv3.WithAttachedKeys())
	if err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 1 {
		t.Fatalf("timetolive at the other gateway: %+v %v", ttl, err)
	}
	lk := v3lockpb.NewLockClient(cb.ActiveConnection())
	held, err := lk.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("/demo/twin-lock"), Lease: int64(lease.ID)})
	if err != nil {
		t.Fatalf("lock with the lease at the other gateway: %v", err)
	}
	if _, err := lk.Unlock(ctx, &v3lockpb.UnlockRequest{Key: held.Key}); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if _, err := ca.Put(ctx, "twin/k2", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if d, err := cb.Delete(ctx, "twin/k2"); err != nil || d.Deleted != 1 {
		t.Fatalf("delete of the lease's key at the other gateway (a Mutex's Unlock): %v %v", d, err)
	}
	members, err := cb.MemberList(ctx)
	if err != nil || len(members.Members) != 2 || members.Members[0].Name != "gw-b" || members.Members[1].ClientURLs[0] != urls["gw-a"] {
		t.Fatalf("member list at gw-b: %v %v", members, err)
	}
	if _, err := cb.Revoke(ctx, lease.ID); err != nil {
		t.Fatalf("revoke at the other gateway: %v", err)
	}
	if r, err := ca.Get(ctx, "twin/k"); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("the revoked lease's key: %v %v", r, err)
	}
}

// TestForwardBounds: one tenant's calls in flight at other gateways stop
// at MaxForwardsPerTenant (another tenant's go on); each done gives one
// back.
func TestForwardBounds(t *testing.T) {
	g := &Gateway{counts: newTenantCounts()}
	a, b := who{caller: lfCaller{tok: "a"}}, who{caller: lfCaller{tok: "b"}}
	var dones []func()
	for i := 0; i < MaxForwardsPerTenant; i++ {
		done, err := g.takeForward(a)
		if err != nil {
			t.Fatalf("forward %d of tenant a: %v", i, err)
		}
		dones = append(dones, done)
	}
	if _, err := g.takeForward(a); err == nil || !strings.Contains(err.Error(), "MaxForwardsPerTenant") {
		t.Fatalf("forward %d of tenant a: %v, want refused naming MaxForwardsPerTenant", MaxForwardsPerTenant+1, err)
	}
	done, err := g.takeForward(b)
	if err != nil {
		t.Fatalf("tenant b while a is at its bound: %v", err)
	}
	done()
	dones[0]()
	if done, err := g.takeForward(a); err != nil {
		t.Fatalf("tenant a after one came back: %v", err)
	} else {
		done()
	}
	for _, d := range dones[1:] {
		d()
	}
	if n := forwards.Load(); n != 0 {
		t.Fatalf("%d forwards counted after all came back", n)
	}
}
