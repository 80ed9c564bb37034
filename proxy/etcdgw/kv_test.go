package etcdgw

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func kvCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func keysOfResp(r *clientv3.GetResponse) string {
	var ks []string
	for _, kv := range r.Kvs {
		ks = append(ks, string(kv.Key)+"="+string(kv.Value))
	}
	return strings.Join(ks, ",")
}

func TestKVThroughClient(t *testing.T) {
	b := newCoreBackend()
	_, cs := coreGateway(t, b, Config{}, "")
	c, ctx := cs[0], kvCtx(t)
	for _, kv := range [][2]string{{"dir/a", "1"}, {"dir/b", "22"}, {"dir/c", "3"}, {"other", "x"}, {"/demo/k", "d"}} {
		if _, err := c.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatalf("put %s: %v", kv[0], err)
		}
	}
	// Parents are containers: not keys.
	if r, err := c.Get(ctx, "dir"); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("get dir (a container): %v %v", r, err)
	}
	r, err := c.Get(ctx, "dir/", clientv3.WithPrefix())
	if err != nil || keysOfResp(r) != "dir/a=1,dir/b=22,dir/c=3" || r.Count != 3 {
		t.Fatalf("prefix get: %v %v", r, err)
	}
	if r, err = c.Get(ctx, "", clientv3.WithPrefix()); err != nil || keysOfResp(r) != "dir/a=1,dir/b=22,dir/c=3,other=x" {
		t.Fatalf("get every relative key: %v %v", r, err)
	}
	if r, err = c.Get(ctx, "dir/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByValue, clientv3.SortDescend), clientv3.WithLimit(2)); err != nil ||
		keysOfResp(r) != "dir/c=3,dir/b=22" || !r.More {
		t.Fatalf("sorted, limited: %v %v", r, err)
	}
	if r, err = c.Get(ctx, "dir/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 3 || len(r.Kvs) != 0 {
		t.Fatalf("count only: %v %v", r, err)
	}
	r, err = c.Get(ctx, "/demo/k")
	if err != nil || keysOfResp(r) != "/demo/k=d" {
		t.Fatalf("absolute key: %v %v", r, err)
	}
	if ep, _ := unrev(r.Kvs[0].CreateRevision); ep != 2 || r.Header.Revision < r.Kvs[0].ModRevision {
		t.Fatalf("revisions: create %d (epoch %d, want 2), header %d", r.Kvs[0].CreateRevision, ep, r.Header.Revision)
	}
	// prev_kv, ignore_value.
	pr, err := c.Put(ctx, "dir/a", "11", clientv3.WithPrevKV())
	if err != nil || pr.PrevKv == nil || string(pr.PrevKv.Value) != "1" || string(pr.PrevKv.Key) != "dir/a" {
		t.Fatalf("put prev_kv: %v %v", pr, err)
	}
	if _, err := c.Put(ctx, "dir/a", "", clientv3.WithIgnoreValue()); err != nil {
		t.Fatalf("ignore_value: %v", err)
	}
	if r, _ = c.Get(ctx, "dir/a"); string(r.Kvs[0].Value) != "11" || r.Kvs[0].Version != 3 {
		t.Fatalf("after ignore_value: %v", r.Kvs)
	}
	if _, err := c.Put(ctx, "nope", "", clientv3.WithIgnoreValue()); err == nil || err.Error() != rpctypes.ErrKeyNotFound.Error() {
		t.Fatalf("ignore_value of a missing key: %v", err)
	}
	// Txn: compare and swap, else-branch reads.
	tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Value("dir/b"), "=", "22")).
		Then(clientv3.OpPut("dir/b", "23"), clientv3.OpGet("dir/b")).Else(clientv3.OpGet("dir/b")).Commit()
	if err != nil || !tr.Succeeded || string(tr.Responses[1].GetResponseRange().Kvs[0].Value) != "23" {
		t.Fatalf("txn: %v %v", tr, err)
	}
	tr, err = c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("new"), "=", 0)).Then(clientv3.OpPut("new", "n")).Commit()
	if err != nil || !tr.Succeeded {
		t.Fatalf("txn create-if-missing: %v %v", tr, err)
	}
	tr, err = c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("new"), "=", 0)).Then(clientv3.OpPut("new", "m")).Else(clientv3.OpGet("new")).Commit()
	if err != nil || tr.Succeeded || string(tr.Responses[0].GetResponseRange().Kvs[0].Value) != "n" {
		t.Fatalf("txn create-if-missing again: %v %v", tr, err)
	}
	tr, err = c.Txn(ctx).If(clientv3.Compare(clientv3.Version("dir/c"), ">", 0)).Then(clientv3.OpGet("dir/c")).Commit()
	if err != nil || !tr.Succeeded {
		t.Fatalf("read-only txn: %v %v", tr, err)
	}
	if _, err = c.Txn(ctx).Then(clientv3.OpPut("a", "1"), clientv3.OpPut("/demo/b", "2")).Commit(); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "two cells") {
		t.Fatalf("txn over two cells: %v", err)
	}
	// Deletes: one key, a missing one, a range.
	dr, err := c.Delete(ctx, "other", clientv3.WithPrevKV())
	if err != nil || dr.Deleted != 1 || string(dr.PrevKvs[0].Value) != "x" {
		t.Fatalf("delete: %v %v", dr, err)
	}
	if dr, err = c.Delete(ctx, "other"); err != nil || dr.Deleted != 0 {
		t.Fatalf("delete of a missing key: %v %v", dr, err)
	}
	if dr, err = c.Delete(ctx, "dir/", clientv3.WithPrefix()); err != nil || dr.Deleted != 3 {
		t.Fatalf("range delete: %v %v", dr, err)
	}
	if _, ok := b.nodes["/etcd/dir"]; ok {
		t.Fatal("the container outlived its last child")
	}
	if _, err := c.Get(ctx, "/nowhere/x"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "served prefixes") {
		t.Fatalf("key outside every prefix: %v", err)
	}
	if _, err := c.Compact(ctx, 5); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "nothing to compact") {
		t.Fatalf("compact: %v", err)
	}
	if _, err := c.MemberAdd(ctx, []string{"http://127.0.0.1:1"}); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "--etcd-listen") {
		t.Fatalf("member add: %v", err)
	}
}

func TestKVCallerTokenForwarded(t *testing.T) {
	b := newCoreBackend()
	_, cs := coreGateway(t, b, Config{AuthRequired: true}, "t1", "")
	c, ctx := cs[0], kvCtx(t)
	if _, err := c.Put(ctx, "mine", "1"); err != nil {
		t.Fatalf("put in grant: %v", err)
	}
	if _, err := c.Put(ctx, "/demo/theirs", "1"); err == nil || err.Error() != rpctypes.ErrPermissionDenied.Error() {
		t.Fatalf("put outside grant: %v", err)
	}
	if _, err := c.Get(ctx, "/demo/theirs"); err == nil || err.Error() != rpctypes.ErrPermissionDenied.Error() {
		t.Fatalf("get outside grant: %v", err)
	}
	b.mu.Lock()
	for _, tok := range b.calls {
		if tok != "t1" {
			t.Errorf("a call went with token %q, not the caller's", tok)
		}
	}
	b.mu.Unlock()
	if _, err := cs[1].Get(ctx, "mine"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token with auth required: %v", err)
	}
}

// TestTxnReadsOneSnapshot (mutant lockd_broken_etcd_txnsnapshot): a
// transaction that writes nothing is decided and answered on one read:
// a write of both keys landing between two single reads (the fake's
// afterRange) cannot show the compare one state and the reads another,
// or one key before the write and the other after it.
func TestTxnReadsOneSnapshot(t *testing.T) {
	b := newCoreBackend()
	_, cs := coreGateway(t, b, Config{}, "")
	c, ctx := cs[0], kvCtx(t)
	for _, k := range []string{"snap/a", "snap/b"} {
		if _, err := c.Put(ctx, k, "0"); err != nil {
			t.Fatal(err)
		}
	}
	wrote := false
	b.afterRange = func(api.RangeRequest) {
		if wrote {
			return
		}
		wrote = true
		b.index++
		for _, p := range []string{"/etcd/snap/a", "/etcd/snap/b"} {
			n := b.nodes[p]
			n.Value, n.ModifyIndex, n.Version = []byte("1"), b.index, n.Version+1
			b.nodes[p] = n
		}
	}
	tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Value("snap/a"), "=", "0")).
		Then(clientv3.OpGet("snap/a"), clientv3.OpGet("snap/b")).
		Else(clientv3.OpGet("snap/a"), clientv3.OpGet("snap/b")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	a := string(tr.Responses[0].GetResponseRange().Kvs[0].Value)
	bv := string(tr.Responses[1].GetResponseRange().Kvs[0].Value)
	if a != bv || tr.Succeeded != (a == "0") {
		t.Fatalf("one transaction saw a=%s b=%s with its compare a=0 %v: not one state", a, bv, tr.Succeeded)
	}
	for i, r := range tr.Responses {
		if h := r.GetResponseRange().Header.Revision; h != tr.Header.Revision {
			t.Fatalf("read %d at revision %d, the transaction at %d", i, h, tr.Header.Revision)
		}
	}
}

// TestTxnReadsPastOneRead: a read-only transaction whose branches
// together are more than one ranges read carries is decided on its
// compares, then read again with the branch taken (still one read); a
// writing transaction's branch too large for one read is read a range
// at a time (it has applied: its answer is no refusal); a bad read
// refuses a transaction before it writes.
func TestTxnReadsPastOneRead(t *testing.T) {
	b := newCoreBackend()
	_, cs := coreGateway(t, b, Config{}, "")
	c, ctx := cs[0], kvCtx(t)
	for _, k := range []string{"big/a", "big/b"} {
		if _, err := c.Put(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	b.maxRanges, b.ranges = 3, nil
	b.mu.Unlock()
	tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Value("big/a"), "=", "v")).
		Then(clientv3.OpGet("big/a"), clientv3.OpGet("big/b")).
		Else(clientv3.OpGet("big/a"), clientv3.OpGet("big/b")).Commit()
	if err != nil || !tr.Succeeded || len(tr.Responses) != 2 {
		t.Fatalf("read-only, both branches past one read: %v %v", tr, err)
	}
	b.mu.Lock()
	if got := fmt.Sprint(b.ranges); got != "[5 1 3]" {
		t.Errorf("ranges reads %s, want [5 1 3] (both branches refused, the compare, the compare with the branch taken)", got)
	}
	b.ranges = nil
	b.mu.Unlock()
	tr, err = c.Txn(ctx).Then(clientv3.OpPut("big/c", "w"), clientv3.OpGet("big/a"), clientv3.OpGet("big/b"), clientv3.OpGet("big/c"), clientv3.OpGet("big/d")).Commit()
	if err != nil || !tr.Succeeded || len(tr.Responses) != 5 || string(tr.Responses[3].GetResponseRange().Kvs[0].Value) != "w" {
		t.Fatalf("a write with four reads past one read: %v %v", tr, err)
	}
	_, err = c.Txn(ctx).Then(clientv3.OpPut("big/e", "x"), clientv3.OpGet("big/a", clientv3.WithLimit(-1))).Commit()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a write with a negative limit read: %v, want InvalidArgument", err)
	}
	if r, err := c.Get(ctx, "big/e"); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("the refused transaction wrote: %v %v", r, err)
	}
}
