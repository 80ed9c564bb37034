package etcdgw

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Regression tests of the attack review (session 34) on leases.

// TestKeepAliveStreamsPerTenant: a tenant holding
// MaxKeepAliveStreamsPerTenant streams has its next one refused naming
// the bound, and another tenant's stream still renews its lease (before,
// one tenant could hold all MaxKeepAliveStreams and leave every other
// tenant's leases, and the locks held with them, to expire).
func TestKeepAliveStreamsPerTenant(t *testing.T) {
	b := newLFBackend()
	g, cs := lfGateway(t, b, "mallory", "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range MaxKeepAliveStreamsPerTenant {
		if !g.counts.take(countKeepAliveStreams, "mallory", MaxKeepAliveStreamsPerTenant) {
			t.Fatal("the count refused below the bound")
		}
	}
	for i, c := range []struct {
		tenant  string
		refused bool
	}{{"mallory", true}, {"alice", false}} {
		gr, err := cs[i].Grant(ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		stream, err := pb.NewLeaseClient(cs[i].ActiveConnection()).LeaseKeepAlive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(gr.ID)}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err) // io.EOF: the stream was refused; Recv says why
		}
		resp, err := stream.Recv()
		refused := status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "MaxKeepAliveStreamsPerTenant")
		if refused != c.refused || (!c.refused && (err != nil || resp.TTL <= 0)) {
			t.Fatalf("%s: %v %v, want refused=%v", c.tenant, resp, err, c.refused)
		}
	}
}
