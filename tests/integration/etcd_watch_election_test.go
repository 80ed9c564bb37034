package integration_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The etcd gateway's Watch and Election on real processes (three
// lockds, a lockproxy with --etcd-listen, tokens required), with etcd's
// own Go client: docs/etcd.md, "Watch" and "Election".

// watchElectTimeout bounds each subtest.
const watchElectTimeout = 2 * time.Minute

// watchWait bounds one wait for a watch answer.
const watchWait = 30 * time.Second

func TestEtcdWatchElection(t *testing.T) {
	g := startEtcdGW(t, etcdTokens)
	cli := g.client(t)
	g.waitGateway(t, cli)
	t.Run("put put delete", func(t *testing.T) { watchPutPutDelete(t, cli) })
	t.Run("outside the grant", func(t *testing.T) { watchOutsideGrant(t, cli) })
	t.Run("election", func(t *testing.T) { electionTwoCandidates(t, cli) })
	t.Run("leader kill", func(t *testing.T) { watchAcrossLeaderKill(t, g, cli) })
}

// TestEtcdWatchOutsideGrantRefused is the refused watch alone (the
// watch_acl mutant's integration check).
func TestEtcdWatchOutsideGrantRefused(t *testing.T) {
	t.Parallel() // its own cluster; it asserts no timing
	g := startEtcdGW(t, etcdTokens)
	cli := g.client(t)
	g.waitGateway(t, cli)
	watchOutsideGrant(t, cli)
}

// nextWatch is the next answer on wc with events or an error.
func nextWatch(t *testing.T, wc clientv3.WatchChan) clientv3.WatchResponse {
	t.Helper()
	for i := 0; i < 100; i++ {
		select {
		case r, ok := <-wc:
			if !ok {
				t.Fatal("the watch channel closed")
			}
			if len(r.Events) > 0 || r.Err() != nil || r.Canceled {
				return r
			}
		case <-time.After(watchWait):
			t.Fatal("no watch answer")
		}
	}
	t.Fatal("100 answers without an event")
	return clientv3.WatchResponse{}
}

// watchEvents reads n events from wc.
func watchEvents(t *testing.T, wc clientv3.WatchChan, n int) []*clientv3.Event {
	t.Helper()
	var out []*clientv3.Event
	for len(out) < n {
		r := nextWatch(t, wc)
		if err := r.Err(); err != nil {
			t.Fatalf("watch ended after %d events: %v", len(out), err)
		}
		out = append(out, r.Events...)
	}
	return out
}

// watchPutPutDelete: a watch sees put, put, delete with the revisions
// the writes answered and prev_kv; a watch from the first put's
// revision replays the same events.
func watchPutPutDelete(t *testing.T, cli *clientv3.Client) {
	ctx, cancel := ctxFor(watchElectTimeout)
	defer cancel()
	const key = "/demo/watch/ppd"
	wc := cli.Watch(ctx, key, clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
	if r := <-wc; !r.Created {
		t.Fatalf("first answer %+v, want created", r)
	}
	p1, err := cli.Put(ctx, key, "one")
	must(t, err)
	p2, err := cli.Put(ctx, key, "two")
	must(t, err)
	d, err := cli.Delete(ctx, key)
	must(t, err)
	revs := []int64{p1.Header.Revision, p2.Header.Revision, d.Header.Revision}
	check := func(name string, evs []*clientv3.Event) {
		t.Helper()
		if len(evs) != 3 {
			t.Fatalf("%s: %d events", name, len(evs))
		}
		want := []struct {
			typ   mvccpb.Event_EventType
			value string
			prev  string
		}{{mvccpb.PUT, "one", ""}, {mvccpb.PUT, "two", "one"}, {mvccpb.DELETE, "", "two"}}
		for i, w := range want {
			ev := evs[i]
			prev := ""
			if ev.PrevKv != nil {
				prev = string(ev.PrevKv.Value)
			}
			if ev.Type != w.typ || string(ev.Kv.Key) != key || string(ev.Kv.Value) != w.value || ev.Kv.ModRevision != revs[i] || prev != w.prev {
				t.Errorf("%s event %d: %v %s=%q mod %d prev %q; want %v %q mod %d prev %q", name, i, ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision, prev, w.typ, w.value, revs[i], w.prev)
			}
		}
		if evs[0].Kv.CreateRevision != revs[0] || evs[1].Kv.CreateRevision != revs[0] || evs[1].Kv.Version != 2 {
			t.Errorf("%s: create revisions %d, %d (version %d), want %d", name, evs[0].Kv.CreateRevision, evs[1].Kv.CreateRevision, evs[1].Kv.Version, revs[0])
		}
	}
	check("live", watchEvents(t, wc, 3))
	replay := cli.Watch(ctx, key, clientv3.WithRev(revs[0]), clientv3.WithPrevKV())
	check("replay", watchEvents(t, replay, 3))
}

// watchOutsideGrant: a watch on keys the caller may not read (the
// tenant has /demo and /etcd, not /payments) is refused permission
// denied, and sees nothing written there.
func watchOutsideGrant(t *testing.T, cli *clientv3.Client) {
	ctx, cancel := ctxFor(watchElectTimeout)
	defer cancel()
	wc := cli.Watch(ctx, "/payments/secret", clientv3.WithPrefix())
	select {
	case r, ok := <-wc:
		if !ok || !errors.Is(r.Err(), rpctypes.ErrPermissionDenied) || len(r.Events) > 0 {
			t.Fatalf("watch outside the grant: ok=%v err %v events %d, want permission denied", ok, r.Err(), len(r.Events))
		}
	case <-time.After(watchWait):
		t.Fatal("a watch outside the grant was not refused")
	}
}

// watchAcrossLeaderKill: a prefix watch through a kill of the cell's
// leader loses no acknowledged put: every revision a put answered shows
// up as an event, in order, and the last events agree with a read after.
func watchAcrossLeaderKill(t *testing.T, g *etcdGW, cli *clientv3.Client) {
	ctx, cancel := ctxFor(3 * watchElectTimeout)
	defer cancel()
	const prefix, keys, puts = "/demo/watch/kill/", 4, 60
	wc := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if r := <-wc; !r.Created {
		t.Fatalf("first answer %+v, want created", r)
	}
	acked := map[int64]string{} // revision -> key of every acknowledged put
	var last int64
	for i := 0; i < puts; i++ {
		if i == puts/3 {
			leader, err := g.c.LeaderOf("demo")
			must(t, err)
			must(t, g.c.Kill(leader))
			t.Logf("killed replica %d, the demo cell's leader", leader)
		}
		key := fmt.Sprintf("%s%d", prefix, i%keys)
		for attempt := 0; attempt < 60; attempt++ {
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			p, err := cli.Put(pctx, key, fmt.Sprint(i))
			pcancel()
			if err == nil {
				acked[p.Header.Revision] = key
				last = max(last, p.Header.Revision)
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if len(acked) < puts {
		t.Fatalf("only %d of %d puts were acknowledged", len(acked), puts)
	}
	seen := map[int64]bool{}
	var prev int64
	for prev < last {
		for _, ev := range nextEventsOrFail(t, wc) {
			if ev.Kv.ModRevision <= prev {
				t.Fatalf("event at %d after one at %d", ev.Kv.ModRevision, prev)
			}
			prev = ev.Kv.ModRevision
			seen[prev] = true
		}
	}
	for r, k := range acked {
		if !seen[r] {
			t.Errorf("the put of %s at %d was acknowledged but never seen by the watch", k, r)
		}
	}
	get, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	must(t, err)
	for _, kv := range get.Kvs {
		if !seen[kv.ModRevision] {
			t.Errorf("%s is at %d, which the watch never saw", kv.Key, kv.ModRevision)
		}
	}
}

func nextEventsOrFail(t *testing.T, wc clientv3.WatchChan) []*clientv3.Event {
	t.Helper()
	r := nextWatch(t, wc)
	if err := r.Err(); err != nil {
		t.Fatalf("the watch ended: %v (compact revision %d)", err, r.CompactRevision)
	}
	return r.Events
}

// electionTwoCandidates: Campaign, Leader, Observe, Proclaim and Resign
// with two candidates; the leader's lease revoked hands over to the
// second.
func electionTwoCandidates(t *testing.T, cli *clientv3.Client) {
	ctx, cancel := ctxFor(watchElectTimeout)
	defer cancel()
	el := v3electionpb.NewElectionClient(cli.ActiveConnection())
	name := []byte("/demo/elect/e1")
	l1, l2 := keptLease(t, ctx, cli), keptLease(t, ctx, cli)
	c1, err := el.Campaign(ctx, &v3electionpb.CampaignRequest{Name: name, Lease: int64(l1), Value: []byte("a")})
	must(t, err)
	obs, err := el.Observe(ctx, &v3electionpb.LeaderRequest{Name: name})
	must(t, err)
	observed := func(want string) {
		t.Helper()
		r, err := obs.Recv()
		must(t, err)
		if string(r.Kv.Value) != want {
			t.Fatalf("observed %q, want %q", r.Kv.Value, want)
		}
	}
	observed("a")
	second := make(chan *v3electionpb.CampaignResponse, 1)
	go func() {
		r, err := el.Campaign(ctx, &v3electionpb.CampaignRequest{Name: name, Lease: int64(l2), Value: []byte("b")})
		if err != nil {
			t.Errorf("second campaign: %v", err)
		}
		second <- r
	}()
	waitQueue(t, ctx, cli, string(name)+"/", 2)
	leaderIs(t, ctx, el, name, "a")
	_, err = el.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: c1.Leader, Value: []byte("a2")})
	must(t, err)
	observed("a2")
	leaderIs(t, ctx, el, name, "a2")
	stale := &v3electionpb.LeaderKey{Name: c1.Leader.Name, Key: c1.Leader.Key, Rev: c1.Leader.Rev - 1, Lease: c1.Leader.Lease}
	if _, err := el.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: stale, Value: []byte("x")}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("proclaim with a wrong revision: %v, want FailedPrecondition not leader", err)
	}
	select {
	case r := <-second:
		t.Fatalf("the second candidate won while the first leads: %v", r)
	default:
	}
	_, err = cli.Revoke(ctx, l1)
	must(t, err)
	var c2 *v3electionpb.CampaignResponse
	select {
	case c2 = <-second:
	case <-time.After(watchWait):
		t.Fatal("the second candidate did not win after the leader's lease was revoked")
	}
	if c2 == nil || c2.Leader.Rev <= c1.Leader.Rev {
		t.Fatalf("second leader %v after %v", c2, c1.Leader)
	}
	observed("b")
	leaderIs(t, ctx, el, name, "b")
	_, err = el.Resign(ctx, &v3electionpb.ResignRequest{Leader: c2.Leader})
	must(t, err)
	if _, err := el.Leader(ctx, &v3electionpb.LeaderRequest{Name: name}); err == nil {
		t.Fatal("a leader after the last one resigned")
	}
}

func leaderIs(t *testing.T, ctx context.Context, el v3electionpb.ElectionClient, name []byte, want string) {
	t.Helper()
	r, err := el.Leader(ctx, &v3electionpb.LeaderRequest{Name: name})
	must(t, err)
	if string(r.Kv.Value) != want {
		t.Fatalf("leader's value %q, want %q", r.Kv.Value, want)
	}
}
