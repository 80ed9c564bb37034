package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestEtcdTwoGateways (mutant lockd_broken_etcd_noforward): two
// lockproxies serving etcd, tokens required. A lease granted at one is
// renewed, written with, locked and elected with, released and revoked
// through the other (which sends each to the granting gateway with the
// caller's token: docs/etcd.md, "Several gateways"); a client given both
// gateways (its calls spread over them) locks and unlocks; MemberList at
// either lists both.
func TestEtcdTwoGateways(t *testing.T) {
	t.Parallel()
	g := startEtcdGW(t, etcdTokens)
	p2, err := g.c.StartProxy("etcd-gw2")
	must(t, err)
	cliA, cliB := g.client(t), g.clientOf(t, p2.EtcdAddr)
	g.waitGateway(t, cliA)
	g.waitGateway(t, cliB)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()

	lease, err := cliA.Grant(ctx, 30)
	must(t, err)
	sB, err := concurrency.NewSession(cliB, concurrency.WithLease(lease.ID)) // KeepAlives at B
	must(t, err)
	m := concurrency.NewMutex(sB, "/demo/two-gw/lock")
	must(t, m.Lock(ctx)) // a Txn with A's lease, at B
	ttl, err := cliB.TimeToLive(ctx, lease.ID, clientv3.WithAttachedKeys())
	if err != nil || ttl.TTL <= 0 || len(ttl.Keys) != 1 {
		t.Fatalf("TimeToLive at B of A's lease holding the lock: %+v %v", ttl, err)
	}
	if r, err := cliB.Get(ctx, m.Key()); err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease != int64(lease.ID) {
		t.Fatalf("Get at B of the lock key of A's lease: %v %v, want its lease %x", r, err, lease.ID)
	}
	must(t, m.Unlock(ctx)) // a Delete of A's lease's key, at B
	e := concurrency.NewElection(sB, "/demo/two-gw/elect")
	must(t, e.Campaign(ctx, "b"))
	must(t, e.Proclaim(ctx, "b2"))
	must(t, e.Resign(ctx))
	members, err := cliB.MemberList(ctx)
	if err != nil || len(members.Members) != 2 {
		t.Fatalf("MemberList at B: %v %v", members, err)
	}
	t.Logf("MemberList at B: %s %v, %s %v", members.Members[0].Name, members.Members[0].ClientURLs, members.Members[1].Name, members.Members[1].ClientURLs)
	_, err = cliB.Revoke(ctx, lease.ID)
	must(t, err)
	if ka, err := cliA.KeepAliveOnce(ctx, lease.ID); err == nil {
		t.Fatalf("the lease revoked at B still renews at A: %v", ka)
	}

	// One client, both gateways: its calls spread over them.
	both := g.clientOf(t, g.addr, p2.EtcdAddr)
	for i := 0; i < 10; i++ {
		s, err := concurrency.NewSession(both, concurrency.WithTTL(30))
		must(t, err)
		m := concurrency.NewMutex(s, fmt.Sprintf("/demo/two-gw/both-%d", i%3))
		lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
		err = m.Lock(lctx)
		lcancel()
		must(t, err)
		must(t, m.Unlock(ctx))
		must(t, s.Close())
	}
}
