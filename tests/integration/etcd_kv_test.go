package integration_test

import (
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEtcdKV: etcd's Go client on real lockds through lockproxy
// --etcd-listen, tokens required (the etcd tenant holds /demo and
// /etcd): put, get, prefix get, sorted get, delete, range delete and a
// txn; and the tenant refused outside its grant, exactly as through the
// SDK (mutant lockd_broken_etcd_auth: the gateway forwarding the proxy's
// own credentials lets it through).
func TestEtcdKV(t *testing.T) {
	t.Parallel() // its own cluster; it asserts no timing
	g := startEtcdGW(t, etcdTokens)
	cli := g.client(t)
	g.waitGateway(t, cli)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()

	t.Run("put-get", func(t *testing.T) {
		for _, k := range []string{"kv/a", "kv/b", "kv/c"} {
			if _, err := cli.Put(ctx, k, "v-"+k); err != nil {
				t.Fatalf("put %s: %v", k, err)
			}
		}
		r, err := cli.Get(ctx, "kv/b")
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v-kv/b" || string(r.Kvs[0].Key) != "kv/b" {
			t.Fatalf("get kv/b: %v %v", r, err)
		}
		if r.Kvs[0].CreateRevision <= 0 || r.Header.Revision < r.Kvs[0].ModRevision {
			t.Fatalf("revisions: %+v header %d", r.Kvs[0], r.Header.Revision)
		}
		r, err = cli.Get(ctx, "kv/", clientv3.WithPrefix())
		if err != nil || r.Count != 3 || len(r.Kvs) != 3 {
			t.Fatalf("prefix get: %v %v", r, err)
		}
		r, err = cli.Get(ctx, "kv/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Key) != "kv/c" || !r.More {
			t.Fatalf("sorted get: %v %v", r, err)
		}
		if r, err = cli.Get(ctx, "kv"); err != nil || len(r.Kvs) != 0 {
			t.Fatalf("a parent is no key: %v %v", r, err)
		}
		if r, err = cli.Get(ctx, "/demo/kvabs"); err != nil || len(r.Kvs) != 0 {
			t.Fatalf("absolute missing key: %v %v", r, err)
		}
	})
	t.Run("txn", func(t *testing.T) {
		tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Value("kv/a"), "=", "v-kv/a")).
			Then(clientv3.OpPut("kv/a", "swapped"), clientv3.OpGet("kv/a")).Else(clientv3.OpGet("kv/a")).Commit()
		if err != nil || !tr.Succeeded || string(tr.Responses[1].GetResponseRange().Kvs[0].Value) != "swapped" {
			t.Fatalf("compare-and-swap: %v %v", tr, err)
		}
		tr, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("kv/a"), "=", 0)).
			Then(clientv3.OpPut("kv/a", "again")).Else(clientv3.OpGet("kv/a")).Commit()
		if err != nil || tr.Succeeded || string(tr.Responses[0].GetResponseRange().Kvs[0].Value) != "swapped" {
			t.Fatalf("create-if-missing of an existing key: %v %v", tr, err)
		}
		tr, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("kv/b"), "<", tr.Header.Revision+1)).
			Then(clientv3.OpPut("kv/b", "stm")).Commit()
		if err != nil || !tr.Succeeded {
			t.Fatalf("mod revision compare (STM's): %v %v", tr, err)
		}
		if _, err := cli.Txn(ctx).Then(clientv3.OpPut("kv/x", "1"), clientv3.OpPut("/demo/x", "2")).Commit(); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("txn over two cells: %v", err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		dr, err := cli.Delete(ctx, "kv/a", clientv3.WithPrevKV())
		if err != nil || dr.Deleted != 1 || string(dr.PrevKvs[0].Value) != "swapped" {
			t.Fatalf("delete: %v %v", dr, err)
		}
		if dr, err = cli.Delete(ctx, "kv/", clientv3.WithPrefix()); err != nil || dr.Deleted != 2 {
			t.Fatalf("range delete: %v %v", dr, err)
		}
		if r, err := cli.Get(ctx, "kv", clientv3.WithPrefix()); err != nil || r.Count != 0 {
			t.Fatalf("after the deletes (containers gone with their last child): %v %v", r, err)
		}
	})
	t.Run("outside-grant", func(t *testing.T) {
		// The tenant holds /demo and /etcd, not /payments.
		if _, err := cli.Put(ctx, "/payments/etcd-stolen", "x"); err == nil || err.Error() != rpctypes.ErrPermissionDenied.Error() {
			t.Fatalf("put outside the grant: %v, want permission denied", err)
		}
		if _, err := cli.Get(ctx, "/payments/etcd-stolen"); err == nil || err.Error() != rpctypes.ErrPermissionDenied.Error() {
			t.Fatalf("get outside the grant: %v, want permission denied", err)
		}
		if _, err := cli.Txn(ctx).Then(clientv3.OpPut("/payments/etcd-txn", "x")).Commit(); err == nil || err.Error() != rpctypes.ErrPermissionDenied.Error() {
			t.Fatalf("txn outside the grant: %v, want permission denied", err)
		}
	})
	t.Run("no-token", func(t *testing.T) {
		anon, err := clientv3.New(clientv3.Config{Endpoints: []string{g.addr}, DialTimeout: etcdDialTimeout})
		must(t, err)
		defer anon.Close()
		if _, err := anon.Get(ctx, "/demo/x"); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("no token: %v, want Unauthenticated", err)
		}
	})
}
