package etcdgw

import (
	"fmt"
	"testing"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
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
// it, and two to one before that (the transaction, the branch's reads); either way its header's revision is its key's
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
			want := map[bool]int{false: 1, true: 2}[old]
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
