package etcdgw

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// pastBackend is the watch tests' fake (a change ring) taking range
// requests as values too (readSpan sends them so) and answering ranges
// in path order, as a cell does.
type pastBackend struct{ *wfBackend }

func (b pastBackend) Call(ctx context.Context, tok, route string, req, resp any) error {
	if r, ok := req.(api.RangeRequest); ok {
		req = &r
	}
	err := b.wfBackend.Call(ctx, tok, route, req, resp)
	if rr, ok := resp.(*api.RangeResponse); ok && err == nil {
		sort.Slice(rr.Nodes, func(i, j int) bool { return rr.Nodes[i].Path < rr.Nodes[j].Path })
	}
	return err
}

// pastGateway starts a gateway on b and a client with token tok ("":
// none).
func pastGateway(t *testing.T, b *wfBackend, tok string) *clientv3.Client {
	t.Helper()
	g, err := Start(context.Background(), Config{Listen: "127.0.0.1:0", DefaultPrefix: "/demo/etcd"}, pastBackend{b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	cfg := clientv3.Config{Endpoints: []string{g.Addr()}, DialTimeout: 5 * time.Second}
	if tok != "" {
		cfg.Username, cfg.Password = "u", tok
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// pastHistory writes, on b (epoch 3, index 10):
//
//	11 put a=a1   12 put c=c1   13 put d=d1   14 container g   (R = 14)
//	15 put a=a2   16 put a=a3   17 put b=b1   18 delete c      19 delete g
//
// under /demo/k: now a=a3, b=b1, d=d1; at R a=a1, c=c1, d=d1.
func pastHistory(b *wfBackend) (at uint64) {
	b.put("/demo/k/a", "a1")
	b.put("/demo/k/c", "c1")
	b.put("/demo/k/d", "d1")
	at = b.apply(api.ChangePut, api.Node{Path: "/demo/k/g", Container: true})
	b.put("/demo/k/a", "a2")
	b.put("/demo/k/a", "a3")
	b.put("/demo/k/b", "b1")
	b.del("/demo/k/c")
	b.del("/demo/k/g")
	return at
}

// kvsOf is a Get's keys and values as "k=v,...".
func kvsOf(r *clientv3.GetResponse) string {
	var out []string
	for _, kv := range r.Kvs {
		out = append(out, string(kv.Key)+"="+string(kv.Value))
	}
	return strings.Join(out, ",")
}

// TestPastRead: a read at a past revision answers the keys as they were
// at it (rebuilt from the change ring), the header the current revision.
func TestPastRead(t *testing.T) {
	b := newWFBackend()
	at := pastHistory(b)
	c := pastGateway(t, b, "")
	R, now := rev(3, at), rev(3, 19)
	tests := []struct {
		name  string
		key   string
		opts  []clientv3.OpOption
		want  string
		count int64
		more  bool
	}{
		{"put twice after R: its value at R", "/demo/k/a", []clientv3.OpOption{clientv3.WithRev(R)}, "/demo/k/a=a1", 1, false},
		{"between the two puts", "/demo/k/a", []clientv3.OpOption{clientv3.WithRev(rev(3, 15))}, "/demo/k/a=a2", 1, false},
		{"created after R: missing", "/demo/k/b", []clientv3.OpOption{clientv3.WithRev(R)}, "", 0, false},
		{"deleted after R: present", "/demo/k/c", []clientv3.OpOption{clientv3.WithRev(R)}, "/demo/k/c=c1", 1, false},
		{"unchanged since R", "/demo/k/d", []clientv3.OpOption{clientv3.WithRev(R)}, "/demo/k/d=d1", 1, false},
		{"a container is not a key", "/demo/k/g", []clientv3.OpOption{clientv3.WithRev(R)}, "", 0, false},
		{"range at R", "/demo/k/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(R)}, "/demo/k/a=a1,/demo/k/c=c1,/demo/k/d=d1", 3, false},
		{"range at R, limit", "/demo/k/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(R), clientv3.WithLimit(2)}, "/demo/k/a=a1,/demo/k/c=c1", 3, true},
		{"range at R, sorted by value", "/demo/k/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(R), clientv3.WithSort(clientv3.SortByValue, clientv3.SortDescend)}, "/demo/k/d=d1,/demo/k/c=c1,/demo/k/a=a1", 3, false},
		{"range at R, count only", "/demo/k/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(R), clientv3.WithCountOnly()}, "", 3, false},
		{"range at R, mod revision filter", "/demo/k/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(R), clientv3.WithMinModRev(rev(3, 12))}, "/demo/k/c=c1,/demo/k/d=d1", 3, false},
		{"range now", "/demo/k/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(now)}, "/demo/k/a=a3,/demo/k/b=b1,/demo/k/d=d1", 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
			defer cancel()
			r, err := c.Get(ctx, tc.key, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := kvsOf(r); got != tc.want || r.Count != tc.count || r.More != tc.more {
				t.Fatalf("got %q count %d more %v, want %q count %d more %v", got, r.Count, r.More, tc.want, tc.count, tc.more)
			}
			if r.Header.Revision != now {
				t.Fatalf("header revision %d, want the current one %d", r.Header.Revision, now)
			}
		})
	}
	t.Run("revisions of a past key", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
		defer cancel()
		r, err := c.Get(ctx, "/demo/k/a", clientv3.WithRev(R))
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("got %v, %v", r, err)
		}
		if kv := r.Kvs[0]; kv.ModRevision != rev(3, 11) || kv.CreateRevision != rev(3, 11) || kv.Version != 1 {
			t.Fatalf("got mod %d create %d version %d, want %d %d 1", kv.ModRevision, kv.CreateRevision, kv.Version, rev(3, 11), rev(3, 11))
		}
	})
}

// TestPastReadRefused: what the ring cannot tell, and revisions that
// are not past ones of this epoch, are refused as etcd refuses them.
func TestPastReadRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(b *wfBackend) (key string, rev int64)
		want  error
	}{
		{"future revision", func(b *wfBackend) (string, int64) {
			return "/demo/k/a", rev(3, pastHistory(b)+100)
		}, rpctypes.ErrFutureRev},
		{"another epoch", func(b *wfBackend) (string, int64) {
			return "/demo/k/a", rev(2, pastHistory(b))
		}, rpctypes.ErrCompacted},
		{"the previous state left the ring", func(b *wfBackend) (string, int64) {
			b.put("/demo/x", "x1")       // 11
			at := b.put("/demo/y", "y1") // 12
			b.put("/demo/x", "x2")       // 13
			b.setFloor(at)               // x1 is gone, (12, 13] is covered
			return "/demo/x", rev(3, at)
		}, rpctypes.ErrCompacted},
		{"floor above R", func(b *wfBackend) (string, int64) {
			at := pastHistory(b)
			b.setFloor(at + 2)
			return "/demo/k/d", rev(3, at)
		}, rpctypes.ErrCompacted},
		{"more changes than MaxPastReadChanges", func(b *wfBackend) (string, int64) {
			at := b.put("/demo/k/a", "a1")
			for i := 0; i <= MaxPastReadChanges; i++ {
				b.put("/demo/k/z", fmt.Sprint(i))
			}
			return "/demo/k/", rev(3, at)
		}, rpctypes.ErrCompacted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newWFBackend()
			key, r := tc.setup(b)
			c := pastGateway(t, b, "")
			ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
			defer cancel()
			resp, err := c.Get(ctx, key, clientv3.WithPrefix(), clientv3.WithRev(r))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v (%v), want %v", resp, err, tc.want)
			}
		})
	}
	t.Run("the state still in the ring is served", func(t *testing.T) {
		b := newWFBackend()
		b.put("/demo/x", "x1")
		at := b.put("/demo/x", "x2")
		b.put("/demo/x", "x3")
		b.setFloor(at)
		c := pastGateway(t, b, "")
		ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
		defer cancel()
		r, err := c.Get(ctx, "/demo/x", clientv3.WithRev(rev(3, at)))
		if err != nil || kvsOf(r) != "/demo/x=x2" {
			t.Fatalf("got %v, %v; want x2", r, err)
		}
	})
}

// TestPastReadOutsideGrant: a past read outside the caller's grant is
// refused by the range read done with the caller's token, before the
// ring is read with the proxy's.
func TestPastReadOutsideGrant(t *testing.T) {
	b := newWFBackend()
	b.put("/other/secret", "s1")
	at := b.put("/demo/k/a", "a1")
	b.put("/other/secret", "s2")
	b.put("/demo/k/a", "a2")
	c := pastGateway(t, b, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	b.mu.Lock()
	reads := b.reads
	b.mu.Unlock()
	if r, err := c.Get(ctx, "/other/secret", clientv3.WithRev(rev(3, at))); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("outside the grant: got %v, %v; want permission denied", r, err)
	}
	b.mu.Lock()
	after := b.reads
	b.mu.Unlock()
	if after != reads {
		t.Fatalf("the ring was read (%d reads) for a refused read", after-reads)
	}
	if r, err := c.Get(ctx, "/demo/k/a", clientv3.WithRev(rev(3, at))); err != nil || kvsOf(r) != "/demo/k/a=a1" {
		t.Fatalf("inside the grant: got %v, %v; want a1", r, err)
	}
}
