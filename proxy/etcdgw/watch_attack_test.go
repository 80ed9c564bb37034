package etcdgw

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Regression tests of the attack review (session 34) on watches.

// failingWatchServer is a watch stream whose every Send fails (the
// client went away).
type failingWatchServer struct {
	grpc.ServerStream
}

func (failingWatchServer) Send(*pb.WatchResponse) error { return errors.New("stream broken") }

func (failingWatchServer) Recv() (*pb.WatchRequest, error) { return nil, errors.New("stream broken") }

// TestWatchCreateSendFailureEnds: a create whose created answer cannot be
// sent leaves no watch behind: the stream's cancelAll returns (it used
// to wait forever for a watch that never ran, leaking the handler and
// the credential's watch stream), and the tenant's count is given back.
func TestWatchCreateSendFailureEnds(t *testing.T) {
	b := newWFBackend()
	g, _ := wfGateway(t, b, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := g.who(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := &watchStream{g: g, srv: failingWatchServer{}, w: w, ctx: ctx, watches: map[int64]*watch{}}
	if err := ws.create(&pb.WatchCreateRequest{Key: []byte("/demo/a")}); err == nil {
		t.Fatal("create on a broken stream answered no error")
	}
	done := make(chan struct{})
	go func() { ws.cancelAll(); close(done) }()
	select {
	case <-done:
	case <-time.After(wfWithin):
		t.Fatal("cancelAll hangs on a watch whose created answer failed")
	}
	if n := g.counts.n[countKey{kind: countWatches, who: tenantOf(w)}]; n != 0 {
		t.Fatalf("the tenant still counts %d watches", n)
	}
}

// TestWatchesPerTenant: a tenant at MaxWatchesPerTenant has its next
// watch refused naming the bound, and another tenant's watch is served
// (one tenant cannot fill MaxFeedSubscribers, which every tenant's
// watches need).
func TestWatchesPerTenant(t *testing.T) {
	b := newWFBackend()
	g, _ := wfGateway(t, b, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*wfWithin)
	defer cancel()
	for range MaxWatchesPerTenant {
		if !g.counts.take(countWatches, "alice", MaxWatchesPerTenant) {
			t.Fatal("the count refused below the bound")
		}
	}
	for _, c := range []struct {
		tok     string
		refused bool
	}{{"alice", true}, {"bob", false}} {
		cli := wfClient(t, g, c.tok)
		key := "/demo/x"
		if c.tok == "bob" {
			key = "/other/x"
		}
		wc := cli.Watch(ctx, key)
		b.put(key, "v")
		r := wfRecv(t, wc)
		refused := r.Canceled && strings.Contains(r.Err().Error()+r.CancelReason, "MaxWatchesPerTenant")
		if refused != c.refused {
			t.Fatalf("%s: answer %+v (err %v), want refused=%v", c.tok, r, r.Err(), c.refused)
		}
	}
}

// wfClient is one more client of g with token tok.
func wfClient(t *testing.T, g *Gateway, tok string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{g.Addr()}, DialTimeout: 5 * time.Second, Username: "u", Password: tok, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestWaitersPollWhenFeedFull: with the gateway's feed subscribers all
// taken (MaxFeedSubscribers, by any tenant's watches), waitGone and
// waitChange (what Lock and Campaign wait with) poll instead of failing:
// a full feed never refuses a Lock.
func TestWaitersPollWhenFeedFull(t *testing.T) {
	b := newWFBackend()
	g, _ := wfGateway(t, b, "")
	g.changes.mu.Lock()
	g.changes.nsubs = MaxFeedSubscribers
	g.changes.mu.Unlock()
	defer func() {
		g.changes.mu.Lock()
		g.changes.nsubs = 0
		g.changes.mu.Unlock()
	}()
	p, _ := b.Prefix("/demo")
	at := b.put("/demo/a", "v")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	gone := make(chan error, 1)
	go func() { gone <- g.changes.waitGone(ctx, p, "/demo/a", at) }()
	changed := make(chan error, 1)
	go func() {
		_, err := g.changes.waitChange(ctx, p, "/demo/b", "", at)
		changed <- err
	}()
	time.Sleep(2 * feedPollInterval) // both polling (or already failed)
	b.del("/demo/a")
	b.put("/demo/b", "w")
	if err := <-gone; err != nil {
		t.Fatalf("waitGone with a full feed: %v", err)
	}
	if err := <-changed; err != nil {
		t.Fatalf("waitChange with a full feed: %v", err)
	}
}

// noHoldBackend is a wfBackend whose cell never holds a change read (as
// a cell whose api.MaxChangesWaiters long polls are all taken answers).
type noHoldBackend struct{ *wfBackend }

func (b noHoldBackend) CallOwn(ctx context.Context, route string, req, resp any) error {
	if r, ok := req.(*api.ChangesRequest); ok {
		c := *r
		c.WaitMS = 0
		req = &c
	}
	return b.wfBackend.CallOwn(ctx, route, req, resp)
}

// TestFeedPacesUnheldReads: a feed reader whose reads come back at once
// with nothing (the cell's waiter table full: a tenant can fill it with
// its own long polls) reads at most once per feedEmptyPause instead of
// spinning on the cell's leader.
func TestFeedPacesUnheldReads(t *testing.T) {
	wb := newWFBackend()
	g, err := Start(context.Background(), Config{Listen: "127.0.0.1:0"}, noHoldBackend{wb})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	p, _ := wb.Prefix("/demo")
	s, err := g.changes.open(p, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	const window = 10 * feedEmptyPause
	time.Sleep(window)
	wb.mu.Lock()
	reads := wb.reads
	wb.mu.Unlock()
	if limit := 3 * int(window/feedEmptyPause); reads > limit {
		t.Fatalf("%d change reads in %v, want at most %d (one per feedEmptyPause)", reads, window, limit)
	}
}
