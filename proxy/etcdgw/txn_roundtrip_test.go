package etcdgw

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestTxnUnreadOnlyWhenProvenMissing: a transaction's put skips the read
// of its key only when a compare says the key's create revision is 0 (a
// put that applies then creates it); any other compare, a put keeping
// the key's value or lease, or a delete reads it (mutant
// lockd_broken_etcd_txn_unread: every put unread, and a put of a key
// that is there fails its pin until Aborted).
func TestTxnUnreadOnlyWhenProvenMissing(t *testing.T) {
	key := keyPath{Path: "/etcd/k"}
	put := txnWrite{put: &pb.PutRequest{Key: []byte("k")}, key: key}
	cmp := func(target pb.Compare_CompareTarget, result pb.Compare_CompareResult, k string, v int64) txnCompare {
		c := &pb.Compare{Target: target, Result: result, Key: []byte(k)}
		switch target {
		case pb.Compare_CREATE:
			c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: v}
		case pb.Compare_VERSION:
			c.TargetUnion = &pb.Compare_Version{Version: v}
		}
		return txnCompare{cmp: c, key: keyPath{Path: "/etcd/" + k}}
	}
	for _, tc := range []struct {
		name     string
		compares []txnCompare
		wr       txnWrite
		unread   bool
	}{
		{"create revision = 0", []txnCompare{cmp(pb.Compare_CREATE, pb.Compare_EQUAL, "k", 0)}, put, true},
		{"no compare", nil, put, false},
		{"another key's", []txnCompare{cmp(pb.Compare_CREATE, pb.Compare_EQUAL, "j", 0)}, put, false},
		{"create revision = 5", []txnCompare{cmp(pb.Compare_CREATE, pb.Compare_EQUAL, "k", 5)}, put, false},
		{"create revision > 0", []txnCompare{cmp(pb.Compare_CREATE, pb.Compare_GREATER, "k", 0)}, put, false},
		{"version = 0", []txnCompare{cmp(pb.Compare_VERSION, pb.Compare_EQUAL, "k", 0)}, put, false},
		{"ignore value", []txnCompare{cmp(pb.Compare_CREATE, pb.Compare_EQUAL, "k", 0)},
			txnWrite{put: &pb.PutRequest{Key: []byte("k"), IgnoreValue: true}, key: key}, false},
		{"ignore lease", []txnCompare{cmp(pb.Compare_CREATE, pb.Compare_EQUAL, "k", 0)},
			txnWrite{put: &pb.PutRequest{Key: []byte("k"), IgnoreLease: true}, key: key}, false},
		{"a delete", []txnCompare{cmp(pb.Compare_CREATE, pb.Compare_EQUAL, "k", 0)},
			txnWrite{del: &pb.DeleteRangeRequest{Key: []byte("k")}, key: key}, false},
	} {
		pl := &txnPlan{compares: tc.compares, then: []txnWrite{tc.wr}}
		if got := provenMissing(pl, tc.wr); got != tc.unread {
			t.Errorf("%s: unread %v, want %v", tc.name, got, tc.unread)
		}
	}
}

// TestMutexTxnRoundTrips: concurrency.Mutex's transaction (a put if its
// key's create revision is 0, the lock's first-created key in both
// branches) is one call to a lockd that answers its reads and epoch with
// it, and three to one before that (the transaction, its key's epoch,
// the branch's reads); either way its header's revision is its key's
// create revision (or the Mutex would wait for its own key), and the
// else branch, taken when the key is there, reads it.
func TestMutexTxnRoundTrips(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("old lockd %v", old), func(t *testing.T) {
			b := newCoreBackend()
			b.oldLockd = old
			_, cs := coreGateway(t, b, Config{}, "")
			c, ctx := cs[0], kvCtx(t)
			if _, err := c.Put(ctx, "lk/other", "x"); err != nil { // created first: the lock's owner
				t.Fatal(err)
			}
			acquire := func(key string) (*clientv3.TxnResponse, []string) {
				t.Helper()
				b.mu.Lock()
				b.routes = nil
				b.mu.Unlock()
				getOwner := clientv3.OpGet("lk/", append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
				tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
					Then(clientv3.OpPut(key, ""), getOwner).Else(clientv3.OpGet(key), getOwner).Commit()
				if err != nil {
					t.Fatal(err)
				}
				b.mu.Lock()
				defer b.mu.Unlock()
				return tr, b.routes
			}
			tr, routes := acquire("lk/me")
			want := map[bool]int{false: 1, true: 3}[old]
			if !tr.Succeeded || len(routes) != want {
				t.Fatalf("acquire: succeeded %v in calls %v, want %d", tr.Succeeded, routes, want)
			}
			owner := tr.Responses[1].GetResponseRange().Kvs
			if len(owner) != 1 || string(owner[0].Key) != "lk/other" {
				t.Fatalf("owner %v, want lk/other", owner)
			}
			r, err := c.Get(ctx, "lk/me")
			if err != nil || len(r.Kvs) != 1 || r.Kvs[0].CreateRevision != tr.Header.Revision {
				t.Fatalf("the key's create revision %v, the transaction's header %d: want the same", r.Kvs, tr.Header.Revision)
			}
			again, routes := acquire("lk/me")
			mine := again.Responses[0].GetResponseRange().Kvs
			if again.Succeeded || len(mine) != 1 || mine[0].CreateRevision != tr.Header.Revision || len(routes) > want {
				t.Fatalf("again: succeeded %v, own key %v (created at %d) in calls %v", again.Succeeded, mine, tr.Header.Revision, routes)
			}
			if !old && routes[0] != api.RouteTxn {
				t.Fatalf("calls %v: want the transaction alone", routes)
			}
		})
	}
}

// TestTxnCreateOverContainer: "create if absent" of a key that has keys
// below it (a container here, missing to the create-revision compare)
// puts it, as etcd does: the unread key's pin fails once, and the next
// attempt reads it (the attack on the unread put found it Aborted after
// every attempt); with a lease it is refused as before, FailedPrecondition.
func TestTxnCreateOverContainer(t *testing.T) {
	b := newCoreBackend()
	_, cs := coreGateway(t, b, Config{}, "")
	c, ctx := cs[0], kvCtx(t)
	if _, err := c.Put(ctx, "cp/a", "x"); err != nil {
		t.Fatal(err)
	}
	tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("cp"), "=", 0)).Then(clientv3.OpPut("cp", "v")).Commit()
	if err != nil || !tr.Succeeded {
		t.Fatalf("create over a container: %v %v", tr, err)
	}
	r, err := c.Get(ctx, "cp")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" || r.Kvs[0].CreateRevision != tr.Header.Revision {
		t.Fatalf("after it: %v %v (header %d)", r, err, tr.Header.Revision)
	}
	if n := b.nodes["/etcd/cp/a"]; string(n.Value) != "x" {
		t.Fatalf("the key below it: %+v", n)
	}
}

// clientOn is an etcd client of a gateway on b (default prefix /etcd),
// both closed when the test ends.
func clientOn(t *testing.T, b Backend) *clientv3.Client {
	t.Helper()
	g, err := Start(context.Background(), Config{Listen: "127.0.0.1:0", DefaultPrefix: "/etcd"}, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{g.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// staleDirBackend is coreBackend whose directory has /etcd one epoch
// behind its cell (a move or restore the proxy has not seen yet).
type staleDirBackend struct{ *coreBackend }

func (b staleDirBackend) Prefix(path string) (PrefixInfo, bool) {
	p, ok := b.coreBackend.Prefix(path)
	if ok && p.Prefix == "/etcd" {
		p.Epoch--
	}
	return p, ok
}

// TestMutexTxnStaleDirectory: with the gateway's directory an epoch
// behind the cell, concurrency.Mutex's acquire still answers its key's
// create revision as the cell has it, from a lockd that says the epoch
// and from one before that (whose answer says none: the gateway reads
// the key), so the keys created before it are found (else the Mutex
// would take a lock another holds).
func TestMutexTxnStaleDirectory(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("old lockd %v", old), func(t *testing.T) {
			cb := newCoreBackend()
			cb.oldLockd = old
			c, ctx := clientOn(t, staleDirBackend{cb}), kvCtx(t)
			if _, err := c.Put(ctx, "lk/other", "x"); err != nil {
				t.Fatal(err)
			}
			getOwner := clientv3.OpGet("lk/", append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
			tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("lk/me"), "=", 0)).
				Then(clientv3.OpPut("lk/me", ""), getOwner).Else(clientv3.OpGet("lk/me"), getOwner).Commit()
			if err != nil {
				t.Fatal(err)
			}
			mine, err := c.Get(ctx, "lk/me")
			if err != nil || len(mine.Kvs) != 1 || mine.Kvs[0].CreateRevision != tr.Header.Revision {
				t.Fatalf("header %d, the key %v %v: want its create revision", tr.Header.Revision, mine, err)
			}
			before, err := c.Get(ctx, "lk/", append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(tr.Header.Revision-1))...)
			if err != nil || len(before.Kvs) != 1 || string(before.Kvs[0].Key) != "lk/other" {
				t.Fatalf("keys created before it: %v %v, want lk/other", before, err)
			}
		})
	}
}

// TestTxnAskFitsTheBody: the reads asked with a transaction never take
// its body past api.MaxRequestBody, counting JSON's escapes ('<' is six
// bytes): past it they are left out (and read after it), or the lockd
// would refuse the whole transaction.
func TestTxnAskFitsTheBody(t *testing.T) {
	req := api.TxnRequest{Then: []api.TxnOp{{Op: api.TxnPut, Path: "/etcd/k", MakeParents: true, Container: true, Uncontain: true}},
		If: []api.TxnCond{{If: api.CondCreateRev, Cmp: api.CmpEqual, Path: "/etcd/k"}, {If: api.CondMissing, Path: "/etcd/k"}}}
	for _, c := range []string{"a", "<", "&", "é"} {
		long := "/etcd/" + strings.Repeat(c, 900)
		var rds []rangeRead
		for i := 0; i < 55; i++ {
			p := fmt.Sprintf("%s%02d", long, i)
			rds = append(rds, rangeRead{r: &pb.RangeRequest{}, sp: keySpan{Start: p, Root: p}, opts: rangeOpts{limit: 1}})
		}
		req.Reads = txnBranches{success: rds, failure: rds}.ask(&req)
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if req.Reads != nil && len(body) > api.MaxRequestBody {
			t.Errorf("keys of %q: reads asked take the body to %d bytes, past %d", c, len(body), api.MaxRequestBody)
		}
	}
	req.Reads = txnBranches{success: []rangeRead{{r: &pb.RangeRequest{}, sp: keySpan{Start: "/etcd/k", Root: "/etcd/k"}}}}.ask(&req)
	if req.Reads == nil || len(req.Reads.Then) != 1 {
		t.Fatalf("a small read not asked: %+v", req.Reads)
	}
}

// movingBackend: /etcd is on an old cell (epoch 1, index 5000) for every
// read before the first transaction, which applies on the new cell it
// moved to (epoch 2, its index space fresh: 11). A version pin holds
// across the move (versions move with the nodes).
type movingBackend struct {
	*coreBackend
	moved bool
}

func (b *movingBackend) Call(ctx context.Context, tok, route string, req, resp any) error {
	err := b.coreBackend.Call(ctx, tok, route, req, resp)
	if err != nil {
		return err
	}
	switch r := resp.(type) {
	case *api.RangeResponse:
		if !b.moved {
			r.Index, r.Epoch = 5000, 1
			for i := range r.Nodes {
				r.Nodes[i].CreateIndex, r.Nodes[i].ModifyIndex = 4000, 4500
			}
		} else {
			r.Epoch = 2
		}
	case *api.TxnResponse:
		if route == api.RouteTxn {
			b.moved = true
			r.Epoch = 2
			r.Reads = nil
		}
	}
	return nil
}

// TestTxnHeaderAcrossMove: a transaction whose keys were read on the old
// cell and applied on the new one answers its write's revision (the new
// cell's epoch and index: the old cell's read index says nothing of the
// new cell's), and its prev_kv at the old cell's revisions (the second
// attack found rev(new epoch, old read index), ahead of the write).
func TestTxnHeaderAcrossMove(t *testing.T) {
	cb := newCoreBackend()
	cb.nodes["/etcd/k"] = api.Node{Path: "/etcd/k", Value: []byte("old"), Version: 3, CreateIndex: 4, ModifyIndex: 5}
	c, ctx := clientOn(t, &movingBackend{coreBackend: cb}), kvCtx(t)
	tr, err := c.Txn(ctx).Then(clientv3.OpPut("k", "new", clientv3.WithPrevKV())).Commit()
	if err != nil {
		t.Fatal(err)
	}
	e, i := unrev(tr.Header.Revision)
	get, err := c.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("txn header epoch %d index %d; key's mod revision now %d (epoch %d index %d); get header %d", e, i, get.Kvs[0].ModRevision, 2, cb.index, get.Header.Revision)
	if tr.Header.Revision != get.Kvs[0].ModRevision {
		t.Errorf("txn header revision %d (epoch %d, index %d) is not its write's revision %d", tr.Header.Revision, e, i, get.Kvs[0].ModRevision)
	}
	if tr.Header.Revision > get.Header.Revision {
		t.Errorf("txn header %d is past a later read's header %d: revisions went backwards", tr.Header.Revision, get.Header.Revision)
	}
	pk := tr.Responses[0].GetResponsePut().PrevKv
	if pk == nil {
		t.Fatal("no prev_kv")
	}
	if pe, pi := unrev(pk.ModRevision); pe != 1 || pi != 4500 {
		t.Errorf("prev_kv mod revision epoch %d index %d, want the old cell's: epoch 1, index 4500", pe, pi)
	}
}

// TestTxnBodyEstimateNeverUnder: txnBody+rangesBody never undercount
// the JSON of a transaction with its reads, every field at its longest
// and paths of characters JSON escapes (from the second attack).
func TestTxnBodyEstimateNeverUnder(t *testing.T) {
	v := uint64(1<<63 + 12345)
	worst := 0.0
	for _, c := range []string{"a", "<", "\u2028", "é", "\"", "\\"} {
		for _, plen := range []int{1, 10, 100, 1000} {
			p := "/etcd/" + strings.Repeat(c, plen)
			req := api.TxnRequest{WriteHeader: api.WriteHeader{Session: ^uint64(0), Secret: strings.Repeat("f", 64), Request: ^uint64(0), Ack: ^uint64(0)}}
			for i := 0; i < api.MaxTxnOps; i++ {
				req.Then = append(req.Then, api.TxnOp{Op: api.TxnCreate, Path: fmt.Sprintf("%s%02d", p, i), Value: []byte("x"), Version: &v, Ephemeral: true, Sequential: true, MakeParents: true, Container: true, Uncontain: true})
			}
			for i := 0; i < api.MaxTxnConds; i++ {
				req.If = append(req.If, api.TxnCond{If: api.CondVersionCmp, Path: fmt.Sprintf("%s%02d", p, i), Token: ^uint64(0), Version: ^uint64(0), Cmp: api.CmpNotEqual, Rev: ^uint64(0), Value: []byte{}, Owner: ^uint64(0)})
			}
			var rds []rangeRead
			for i := 0; i < 5; i++ {
				q := fmt.Sprintf("%s%02d", p, i)
				rds = append(rds, rangeRead{r: &pb.RangeRequest{}, sp: keySpan{Start: q, End: q + "\x00", Root: q}, opts: rangeOpts{limit: 1 << 30, keysOnly: true, countOnly: true}})
			}
			r := &api.TxnReads{Then: spanRequests(rds), Else: spanRequests(rds)}
			for i := range r.Then {
				r.Then[i].Limit, r.Then[i].KeysOnly, r.Then[i].CountOnly, r.Then[i].SkipContainers = 1<<62, true, true, true
				r.Else[i] = r.Then[i]
			}
			est := txnBody(&req) + rangesBody("", r.Then) + rangesBody("", r.Else)
			req.Reads = r
			body, _ := json.Marshal(req)
			ratio := float64(len(body)) / float64(est)
			if ratio > worst {
				worst = ratio
			}
			if len(body) > est {
				t.Errorf("%q x%d: body %d > estimate %d", c, plen, len(body), est)
			}
		}
	}
	t.Logf("worst body/estimate %.3f", worst)
}
