package etcdgw

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// TestNoGoroutineLeak: watches (ended by the client and by the stream
// breaking), keep-alive streams, a Lock and a canceled Lock leave no
// goroutine behind once their clients and the gateway are closed
// (attack review, session 34).
func TestNoGoroutineLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := newLFBackend()
	g, err := Start(context.Background(), Config{Listen: "127.0.0.1:0", DefaultPrefix: "/demo/etcd"}, b)
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{g.Addr()}, DialTimeout: 5 * time.Second, Username: "u", Password: "alice", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	la, err := c.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	ka, err := c.KeepAlive(ctx, la.ID)
	if err != nil {
		t.Fatal(err)
	}
	<-ka
	if _, err := lockClient(c).Lock(ctx, lockReq("/demo/leak", la.ID)); err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _ = lockClient(c).Lock(lctx, lockReq("/demo/leak", la.ID+1)) // an unknown lease: refused
	lcancel()
	wctx, wcancel := context.WithCancel(ctx)
	_ = c.Watch(wctx, "/demo/w", clientv3.WithPrefix())
	_ = c.Watch(ctx, "/demo/v")
	time.Sleep(200 * time.Millisecond)
	wcancel()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}
