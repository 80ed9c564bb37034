package etcdgw

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestElectionOrder: the leader is the lowest create index whatever the
// names (keys etcd's concurrency package writes take part); the
// predecessor is the candidate created last before one.
func TestElectionOrder(t *testing.T) {
	nodes := []api.Node{
		{Path: "/e/zz", CreateIndex: 5},
		{Path: "/e/1_0000000009", CreateIndex: 9},
		{Path: "/e/2_0000000002", CreateIndex: 7},
		{Path: "/e/aa", CreateIndex: 12},
	}
	if l := leaderOf(nodes); l == nil || l.Path != "/e/zz" {
		t.Fatalf("leader %v", l)
	}
	cases := []struct {
		create uint64
		want   string
	}{{5, ""}, {7, "/e/zz"}, {9, "/e/2_0000000002"}, {12, "/e/1_0000000009"}}
	for _, c := range cases {
		p := predecessorOf(nodes, c.create)
		got := ""
		if p != nil {
			got = p.Path
		}
		if got != c.want {
			t.Errorf("predecessor of %d: %q, want %q", c.create, got, c.want)
		}
	}
	if leaderOf(nil) != nil {
		t.Fatal("a leader of no candidates")
	}
}

// elBackend is the lease tests' fake with the two writes elections need
// besides theirs: RoutePut and RouteTxn (create-revision compares, put,
// delete).
type elBackend struct{ *lfBackend }

func (b elBackend) Call(ctx context.Context, tok, route string, req, resp any) error {
	switch route {
	case api.RouteTxn:
		var r api.TxnRequest
		via(req, &r)
		out, err := b.txn(r)
		if err == nil {
			via(out, resp)
		}
		return err
	case api.RoutePut:
		var r api.PutRequest
		via(req, &r)
		out, err := b.txn(api.TxnRequest{WriteHeader: r.WriteHeader, Then: []api.TxnOp{{Op: api.TxnPut, Path: r.Path, Value: r.Value}}})
		if err == nil {
			via(api.WriteResponse{Node: out.Nodes[0], Index: out.Index}, resp)
		}
		return err
	}
	return b.lfBackend.Call(ctx, tok, route, req, resp)
}

func (b elBackend) txn(r api.TxnRequest) (api.TxnResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, c := range r.If {
		n := b.nodes[c.Path]
		if c.If != api.CondCreateRev || c.Cmp != api.CmpEqual || n.CreateIndex == 0 || api.MakeToken(2, n.CreateIndex) != c.Rev {
			return api.TxnResponse{Failed: &api.TxnFailure{Kind: api.TxnFailedIf, Index: i, Code: api.CodeConditionFailed}}, &api.Error{Code: api.CodeConditionFailed}
		}
	}
	b.index++
	out := api.TxnResponse{Succeeded: true, Index: b.index}
	for _, o := range r.Then {
		n, ok := b.nodes[o.Path]
		if !ok || (n.Ephemeral && n.Owner != r.Session) {
			return api.TxnResponse{}, &api.Error{Code: api.CodeForbidden, Message: "fake: not the owner of " + o.Path}
		}
		switch o.Op {
		case api.TxnPut:
			n.Value, n.Version, n.ModifyIndex = o.Value, n.Version+1, b.index
			b.nodes[o.Path] = n
		case api.TxnDelete:
			delete(b.nodes, o.Path)
		}
		out.Nodes = append(out.Nodes, n)
	}
	return out, nil
}

// TestElectionCampaignOnFake: two candidates, Leader, Proclaim (and a
// stale one refused not leader), the leader's lease revoked hands over,
// Resign leaves no leader. The fake has no change ring: waits poll.
func TestElectionCampaignOnFake(t *testing.T) {
	b := elBackend{newLFBackend()}
	g, err := Start(context.Background(), Config{Listen: "127.0.0.1:0", DefaultPrefix: "/demo/etcd"}, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{g.Addr()}, DialTimeout: 5 * time.Second, Username: "u", Password: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	el := v3electionpb.NewElectionClient(c.ActiveConnection())
	l1, err := c.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := c.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	name := []byte("e1") // relative: /demo/etcd/e1
	c1, err := el.Campaign(ctx, &v3electionpb.CampaignRequest{Name: name, Lease: int64(l1.ID), Value: []byte("a")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(c1.Leader.Key), "e1/") {
		t.Fatalf("leader key %q: not relative under the name", c1.Leader.Key)
	}
	obs, err := el.Observe(ctx, &v3electionpb.LeaderRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	observed := func(want string) {
		t.Helper()
		r, err := obs.Recv()
		if err != nil || string(r.Kv.Value) != want {
			t.Fatalf("observed %v, %v; want %q", r, err, want)
		}
	}
	observed("a")
	second := make(chan error, 1)
	go func() {
		_, err := el.Campaign(ctx, &v3electionpb.CampaignRequest{Name: name, Lease: int64(l2.ID), Value: []byte("b")})
		second <- err
	}()
	elLeaderIs(t, ctx, el, name, "a")
	if _, err := el.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: c1.Leader, Value: []byte("a2")}); err != nil {
		t.Fatal(err)
	}
	elLeaderIs(t, ctx, el, name, "a2")
	observed("a2")
	stale := &v3electionpb.LeaderKey{Name: name, Key: c1.Leader.Key, Rev: c1.Leader.Rev - 1, Lease: c1.Leader.Lease}
	if _, err := el.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: stale, Value: []byte("x")}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stale proclaim: %v, want FailedPrecondition", err)
	}
	select {
	case err := <-second:
		t.Fatalf("the second candidate returned while the first leads: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := c.Revoke(ctx, l1.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second campaign: %v", err)
	}
	elLeaderIs(t, ctx, el, name, "b")
	observed("b")
	lr, err := el.Leader(ctx, &v3electionpb.LeaderRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	lk := &v3electionpb.LeaderKey{Name: name, Key: lr.Kv.Key, Rev: lr.Kv.CreateRevision, Lease: int64(l2.ID)}
	if _, err := el.Resign(ctx, &v3electionpb.ResignRequest{Leader: lk}); err != nil {
		t.Fatal(err)
	}
	if _, err := el.Leader(ctx, &v3electionpb.LeaderRequest{Name: name}); status.Code(err) != codes.NotFound {
		t.Fatalf("leader after resign: %v, want NotFound no leader", err)
	}
}

func elLeaderIs(t *testing.T, ctx context.Context, el v3electionpb.ElectionClient, name []byte, want string) {
	t.Helper()
	r, err := el.Leader(ctx, &v3electionpb.LeaderRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Kv.Value) != want {
		t.Fatalf("leader's value %q, want %q", r.Kv.Value, want)
	}
}
