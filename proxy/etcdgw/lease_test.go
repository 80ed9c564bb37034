package etcdgw

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeClock is a clock a test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var demo = PrefixInfo{Prefix: "/demo", Cell: "c1", Epoch: 2}

// grantID grants a lease with a chosen id (clientv3 has no option).
func grantID(c *clientv3.Client, id, ttl int64) (*pb.LeaseGrantResponse, error) {
	return pb.NewLeaseClient(c.ActiveConnection()).LeaseGrant(context.Background(), &pb.LeaseGrantRequest{ID: id, TTL: ttl})
}

func whoFor(tok string) who { return who{token: tok, caller: lfCaller{tok: tok}} }

func TestClampTTL(t *testing.T) {
	for _, c := range []struct{ in, want int64 }{
		{-5, 1}, {0, 1}, {1, 1}, {5, 5}, {300, 300}, {301, 300}, {1 << 40, 300},
	} {
		if got := clampTTL(c.in); got != c.want {
			t.Errorf("clampTTL(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestTTLLeft(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		left time.Duration
		want int64
	}{
		{-time.Second, 0}, {0, 0}, {time.Millisecond, 1}, {1999 * time.Millisecond, 1}, {2 * time.Second, 2}, {9800 * time.Millisecond, 9},
	} {
		if got := ttlLeft(now.Add(c.left), now); got != c.want {
			t.Errorf("ttlLeft(now+%v) = %d, want %d", c.left, got, c.want)
		}
	}
	// sessionUntil: lease less the age the proxy reports, less lease/50.
	sent := time.Unix(2000, 0)
	if got, want := sessionUntil(sent, 10_000, 3_000), sent.Add(6800*time.Millisecond); !got.Equal(want) {
		t.Errorf("sessionUntil = %v, want %v", got, want)
	}
}

// TestKeepAliveAnswersWhatIsLeft: a KeepAlive answers what is left of
// the sessions' guarantee, counted from the send of the renewal less the
// lease's age at the proxy, less the time the call took, less the drift;
// not the granted TTL.
func TestKeepAliveAnswersWhatIsLeft(t *testing.T) {
	cases := []struct {
		name      string
		ttl       int64
		session   bool          // open a session (a key was written)
		sinceOpen time.Duration // from the open to the KeepAlive
		ageMS     int64         // the lease's age the proxy answers
		callTakes time.Duration // the KeepAlive call's duration
		want      int64
	}{
		// No session: the gateway holds the lease; its TTL is granted.
		{name: "no session", ttl: 10, want: 10},
		// 10 s lease renewed at send, 1 s old at the proxy: 10-1-0.2 = 8.8.
		{name: "aged at proxy", ttl: 10, session: true, sinceOpen: 6 * time.Second, ageMS: 1000, want: 8},
		// and the call took 1.5 s: 7.3.
		{name: "slow call", ttl: 10, session: true, sinceOpen: 6 * time.Second, ageMS: 1000, callTakes: 1500 * time.Millisecond, want: 7},
		// a 60 s lease aged 20 s: 60-20-1.2 = 38.8.
		{name: "long lease", ttl: 60, session: true, sinceOpen: 30 * time.Second, ageMS: 20_000, want: 38},
		// fresh: 10-0-0.2 = 9.8 (never the full 10).
		{name: "fresh", ttl: 10, session: true, sinceOpen: time.Second, want: 9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newLFBackend()
			clk := &fakeClock{t: time.Unix(5000, 0)}
			b.ageMS = c.ageMS
			b.onKA = func() { clk.add(c.callTakes) }
			tb := makeLeaseTable(b, clk.now)
			alice := whoFor("alice")
			l, err := tb.grant(alice, 0, c.ttl)
			if err != nil {
				t.Fatal(err)
			}
			if c.session {
				if _, err := tb.session(context.Background(), alice, l.key.id, demo); err != nil {
					t.Fatal(err)
				}
			}
			clk.add(c.sinceOpen)
			if got := tb.renew(context.Background(), alice, l.key.id); got != c.want {
				t.Errorf("KeepAlive answered TTL %d, want %d", got, c.want)
			}
			st, err := tb.status(alice, l.key.id)
			if err != nil || st.ttl != c.want || st.granted != c.ttl {
				t.Errorf("TimeToLive = %+v, %v; want TTL %d granted %d", st, err, c.want, c.ttl)
			}
		})
	}
}

// isLeaseNotFound reports whether err is etcd's lease-not-found.
func isLeaseNotFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || status.Code(err) == codes.NotFound &&
		strings.Contains(err.Error(), "requested lease not found")
}

// TestLeaseBoundToCredential: a lease id is the granting credential's
// only: another credential's KeepAlive, TimeToLive, Revoke, Leases and
// writes with it answer as for an unknown lease, and change nothing.
func TestLeaseBoundToCredential(t *testing.T) {
	cases := []struct {
		name string
		try  func(g *Gateway, bob *clientv3.Client, id clientv3.LeaseID) error // nil: refused as not found
	}{
		{"keepalive", func(_ *Gateway, bob *clientv3.Client, id clientv3.LeaseID) error {
			_, err := bob.KeepAliveOnce(context.Background(), id)
			return err
		}},
		{"timetolive", func(_ *Gateway, bob *clientv3.Client, id clientv3.LeaseID) error {
			r, err := bob.TimeToLive(context.Background(), id)
			if err == nil && r.TTL != -1 {
				return nil // found: wrong
			}
			return rpctypes.ErrLeaseNotFound
		}},
		{"revoke", func(_ *Gateway, bob *clientv3.Client, id clientv3.LeaseID) error {
			_, err := bob.Revoke(context.Background(), id)
			return err
		}},
		{"put with lease", func(g *Gateway, _ *clientv3.Client, id clientv3.LeaseID) error {
			_, err := g.leases.session(context.Background(), whoFor("bob"), int64(id), demo)
			return err
		}},
		{"leases", func(_ *Gateway, bob *clientv3.Client, id clientv3.LeaseID) error {
			r, err := bob.Leases(context.Background())
			if err != nil {
				return err
			}
			for _, l := range r.Leases {
				if l.ID == id {
					return nil
				}
			}
			return rpctypes.ErrLeaseNotFound
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newLFBackend()
			g, cs := lfGateway(t, b, "alice", "bob")
			alice, bob := cs[0], cs[1]
			ctx := context.Background()
			gr, err := alice.Grant(ctx, 30)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.leases.session(ctx, whoFor("alice"), int64(gr.ID), demo); err != nil {
				t.Fatal(err)
			}
			if err := c.try(g, bob, gr.ID); !isLeaseNotFound(err) {
				t.Fatalf("bob's %s of alice's lease: %v, want lease not found", c.name, err)
			}
			r, err := alice.TimeToLive(ctx, gr.ID)
			if err != nil || r.TTL <= 0 {
				t.Fatalf("alice's lease after bob's %s: %+v %v, want alive", c.name, r, err)
			}
			if b.kas != 0 || b.closes != 0 {
				t.Fatalf("bob's %s renewed %d / closed %d of alice's sessions", c.name, b.kas, b.closes)
			}
			// bob may grant the same id for himself: ids are per credential.
			if _, err := grantID(bob, int64(gr.ID), 30); err != nil {
				t.Fatalf("bob granting id %x: %v", gr.ID, err)
			}
		})
	}
}

func TestLeaseGrantRevokeKeys(t *testing.T) {
	b := newLFBackend()
	g, cs := lfGateway(t, b, "alice")
	c := cs[0]
	ctx := context.Background()
	gr, err := c.Grant(ctx, 0)
	if err != nil || gr.TTL != 1 || tagOf(int64(gr.ID)) != g.leases.tag {
		t.Fatalf("grant TTL 0: %+v %v; want TTL 1 (api.MinLease) and this gateway's tag", gr, err)
	}
	gr, err = c.Grant(ctx, 100_000)
	if err != nil || gr.TTL != 300 {
		t.Fatalf("grant TTL 100000: %+v %v; want 300 (api.MaxLease)", gr, err)
	}
	if _, err := grantID(c, int64(gr.ID), 5); status.Convert(err).Message() != status.Convert(rpctypes.ErrGRPCLeaseExist).Message() {
		t.Fatalf("grant of a taken id: %v", err)
	}
	lc := lockClient(c)
	lk, err := lc.Lock(ctx, lockReq("/demo/m", gr.ID))
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := c.TimeToLive(ctx, gr.ID, clientv3.WithAttachedKeys())
	if err != nil || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != string(lk.Key) || ttl.GrantedTTL != 300 {
		t.Fatalf("TimeToLive: %+v %v; want key %s", ttl, err, lk.Key)
	}
	if g.leases.leaseOf("c1", b.nodes[string(lk.Key)].Owner) != int64(gr.ID) {
		t.Fatalf("leaseOf the lock node's owner is not the lease")
	}
	if _, err := c.Revoke(ctx, gr.ID); err != nil {
		t.Fatal(err)
	}
	if n := b.nodeCount(); n != 0 || b.closes != 1 {
		t.Fatalf("after revoke: %d nodes, %d closes; want 0 and 1", n, b.closes)
	}
	if r, err := c.TimeToLive(ctx, gr.ID); err != nil || r.TTL != -1 {
		t.Fatalf("TimeToLive after revoke: %+v %v; want TTL -1", r, err)
	}
	if _, err := c.Revoke(ctx, gr.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
}

// TestLeaseExpiresWithoutKeepAlive: past its TTL without a KeepAlive the
// lease is forgotten and its sessions closed; a KeepAlive in time keeps it.
func TestLeaseExpiresWithoutKeepAlive(t *testing.T) {
	b := newLFBackend()
	clk := &fakeClock{t: time.Unix(5000, 0)}
	tb := makeLeaseTable(b, clk.now)
	alice := whoFor("alice")
	kept, _ := tb.grant(alice, 7, 5)
	dropped, _ := tb.grant(alice, 8, 5)
	for _, id := range []int64{7, 8} {
		if _, err := tb.session(context.Background(), alice, id, demo); err != nil {
			t.Fatal(err)
		}
	}
	clk.add(4 * time.Second)
	if tb.renew(context.Background(), alice, kept.key.id) == 0 {
		t.Fatal("KeepAlive in time answered 0")
	}
	clk.add(2 * time.Second)
	gone := tb.expired()
	if len(gone) != 1 || gone[0] != dropped {
		t.Fatalf("expired %v, want only lease 8", gone)
	}
	for _, l := range gone {
		if err := tb.closeSessions(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	if b.closes != 1 || tb.renew(context.Background(), alice, 8) != 0 {
		t.Fatalf("closes %d; lease 8 must be gone", b.closes)
	}
	if _, err := tb.session(context.Background(), alice, 8, demo); err != errLeaseNotFound {
		t.Fatalf("write with an expired lease: %v", err)
	}
	// A session that ended at its cell ends the lease: KeepAlive answers 0.
	b.mu.Lock()
	for _, s := range b.sessions {
		s.ended = true
	}
	b.mu.Unlock()
	if ttl := tb.renew(context.Background(), alice, 7); ttl != 0 {
		t.Fatalf("KeepAlive of a lease whose session ended: TTL %d, want 0", ttl)
	}
}

func TestLeaseBounds(t *testing.T) {
	b := newLFBackend()
	tb := makeLeaseTable(b, time.Now)
	alice, bob := whoFor("alice"), whoFor("bob")
	tb.perCred[digestOf(alice)] = MaxLeasesPerCredential
	if _, err := tb.grant(alice, 0, 10); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "MaxLeasesPerCredential") {
		t.Fatalf("alice over her bound: %v", err)
	}
	if _, err := tb.grant(bob, 0, 10); err != nil {
		t.Fatalf("bob refused for alice's bound: %v", err)
	}
	for i := len(tb.leases); i < MaxLeases; i++ {
		tb.leases[leaseKey{"x", int64(i + 1)}] = &lease{}
	}
	if _, err := tb.grant(bob, 0, 10); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "MaxLeases") {
		t.Fatalf("over MaxLeases: %v", err)
	}
	if _, err := tb.grant(bob, -1, 10); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("negative id: %v", err)
	}
	// A chosen id: below 2^47 or with this gateway's tag; another
	// gateway's tag is refused (its calls would go to that gateway).
	tb3 := makeLeaseTable(b, time.Now)
	other := leaseTag(b.Name() + "-other")
	for _, tc := range []struct {
		id int64
		ok bool
	}{{1234, true}, {newLeaseID(tb3.tag), true}, {newLeaseID(other), other == tb3.tag}} {
		_, err := tb3.grant(bob, tc.id, 10)
		if tc.ok != (err == nil) || (err != nil && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "tag"))) {
			t.Fatalf("chosen id %x (tag %x, ours %x): %v, want ok=%v", tc.id, tagOf(tc.id), tb3.tag, err, tc.ok)
		}
	}
	// MaxSessionsPerLease: a lease on more cells than the bound.
	tb2 := makeLeaseTable(b, time.Now)
	l, _ := tb2.grant(alice, 0, 10)
	for i := range MaxSessionsPerLease {
		l.sessions[string(rune('a'+i))] = &leaseSession{until: time.Now().Add(time.Hour)}
	}
	if _, err := tb2.session(context.Background(), alice, l.key.id, demo); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "MaxSessionsPerLease") {
		t.Fatalf("over MaxSessionsPerLease: %v", err)
	}
	// MaxLockWaiters is per tenant: alice full, bob admitted.
	var lw lockWaiters
	for range MaxLockWaiters {
		if _, err := lw.enter("alice"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lw.enter("alice"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "MaxLockWaiters") {
		t.Fatalf("alice over MaxLockWaiters: %v", err)
	}
	rel, err := lw.enter("bob")
	if err != nil {
		t.Fatalf("bob refused for alice's waiters: %v", err)
	}
	rel()
}

func TestLeaseIDs(t *testing.T) {
	tag := leaseTag("proxy-a")
	if tag == leaseTag("proxy-b") {
		t.Skip("the two names hash to one tag")
	}
	for range 100 {
		id := newLeaseID(tag)
		if id <= 0 || tagOf(id) != tag || foreignLease(id, tag) || !foreignLease(id, leaseTag("proxy-b")) {
			t.Fatalf("id %x: tag %x, want %x", id, tagOf(id), tag)
		}
	}
	if foreignLease(1234, tag) {
		t.Fatal("a small client-chosen id is nobody's")
	}
	if err := errForeignLease(newLeaseID(leaseTag("proxy-b"))); !strings.Contains(err.Error(), "leases live in the gateway that granted them") {
		t.Fatal(err)
	}
	_ = api.MinLease
}

// TestKeepAliveStreamsBounded: past MaxKeepAliveStreams a new stream is
// refused ResourceExhausted naming the bound.
func TestKeepAliveStreamsBounded(t *testing.T) {
	b := newLFBackend()
	_, cs := lfGateway(t, b, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gr, err := cs[0].Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	keepAliveStreams.Add(MaxKeepAliveStreams)
	defer keepAliveStreams.Add(-MaxKeepAliveStreams)
	stream, err := pb.NewLeaseClient(cs[0].ActiveConnection()).LeaseKeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(gr.ID)}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err) // io.EOF: the stream was refused; Recv says why
	}
	if _, err := stream.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "MaxKeepAliveStreams") {
		t.Fatalf("a stream past the bound: %v", err)
	}
}

// TestLeaseKeysWithinGrants: TimeToLive(keys) of a caller granted only a
// subtree lists the lease's keys it may read, and no others.
func TestLeaseKeysWithinGrants(t *testing.T) {
	b := newLFBackend()
	_, cs := lfGateway(t, b, "sub")
	ctx := context.Background()
	gr, err := cs[0].Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := lockClient(cs[0]).Lock(ctx, lockReq("/demo/sub/m", gr.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockClient(cs[0]).Lock(ctx, lockReq("/demo/elsewhere/m", gr.ID)); err != nil {
		t.Fatal(err)
	}
	r, err := cs[0].TimeToLive(ctx, gr.ID, clientv3.WithAttachedKeys())
	if err != nil || len(r.Keys) != 1 || string(r.Keys[0]) != string(mine.Key) {
		t.Fatalf("keys %q %v, want only %s", r.Keys, err, mine.Key)
	}
}
