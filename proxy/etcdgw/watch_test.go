package etcdgw

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// wfEvent is what a test expects of one event.
type wfEvent struct {
	typ   mvccpb.Event_EventType
	key   string
	value string
	index uint64 // mod revision's index
	prev  string // prev_kv's value ("": none)
}

// wfCollect reads events from wc until n arrived.
func wfCollect(t *testing.T, wc clientv3.WatchChan, n int) []*clientv3.Event {
	t.Helper()
	var out []*clientv3.Event
	for i := 0; len(out) < n && i < 100; i++ {
		r := wfRecv(t, wc)
		if r.Canceled || r.Err() != nil {
			t.Fatalf("watch ended after %d events: %v", len(out), r.Err())
		}
		out = append(out, r.Events...)
	}
	return out
}

func wfCheck(t *testing.T, epoch uint64, got []*clientv3.Event, want []wfEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Type != w.typ || string(g.Kv.Key) != w.key || string(g.Kv.Value) != w.value || g.Kv.ModRevision != rev(epoch, w.index) {
			t.Errorf("event %d: got %v %q=%q at %d, want %v %q=%q at %d", i, g.Type, g.Kv.Key, g.Kv.Value, g.Kv.ModRevision, w.typ, w.key, w.value, rev(epoch, w.index))
		}
		prev := ""
		if g.PrevKv != nil {
			prev = string(g.PrevKv.Value)
		}
		if prev != w.prev {
			t.Errorf("event %d: prev_kv %q, want %q", i, prev, w.prev)
		}
	}
}

// TestWatchSpanFiltering: a prefix watch sees the puts and deletes of
// its span only, never containers nor other keys of the prefix.
func TestWatchSpanFiltering(t *testing.T) {
	b := newWFBackend()
	_, c := wfGateway(t, b, "")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	wc := c.Watch(ctx, "/demo/b", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if r := wfRecv(t, wc); !r.Created {
		t.Fatalf("first answer %+v, want created", r)
	}
	b.put("/demo/a", "no")
	i1 := b.put("/demo/b/c", "1")
	b.apply(api.ChangePut, api.Node{Path: "/demo/b/dir", Container: true})
	b.put("/other/b", "no")
	i2 := b.put("/demo/bb", "2")
	i3 := b.del("/demo/b/c")
	b.put("/demo/c", "no")
	wfCheck(t, b.epoch, wfCollect(t, wc, 3), []wfEvent{
		{typ: mvccpb.PUT, key: "/demo/b/c", value: "1", index: i1},
		{typ: mvccpb.PUT, key: "/demo/bb", value: "2", index: i2},
		{typ: mvccpb.DELETE, key: "/demo/b/c", index: i3},
	})
}

// TestWatchRelativeKeys: a key without "/" is under the default prefix
// and comes back as the client wrote it.
func TestWatchRelativeKeys(t *testing.T) {
	b := newWFBackend()
	_, c := wfGateway(t, b, "")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	wc := c.Watch(ctx, "foo", clientv3.WithCreatedNotify())
	wfRecv(t, wc)
	i := b.put("/demo/etcd/foo", "v")
	wfCheck(t, b.epoch, wfCollect(t, wc, 1), []wfEvent{{typ: mvccpb.PUT, key: "foo", value: "v", index: i}})
}

// TestWatchFromRevisionReplays: a start revision in the ring replays from
// there, with prev_kv from the ring (the put before the start included).
func TestWatchFromRevisionReplays(t *testing.T) {
	b := newWFBackend()
	b.put("/demo/k", "a")
	i2 := b.put("/demo/k", "b")
	i3 := b.put("/demo/k", "c")
	i4 := b.del("/demo/k")
	_, c := wfGateway(t, b, "")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	wc := c.Watch(ctx, "/demo/k", clientv3.WithRev(rev(b.epoch, i2)), clientv3.WithPrevKV())
	wfCheck(t, b.epoch, wfCollect(t, wc, 3), []wfEvent{
		{typ: mvccpb.PUT, key: "/demo/k", value: "b", index: i2, prev: "a"},
		{typ: mvccpb.PUT, key: "/demo/k", value: "c", index: i3, prev: "b"},
		{typ: mvccpb.DELETE, key: "/demo/k", index: i4, prev: "c"},
	})
}

// TestWatchBelowFloorCompacted: a start revision below the ring's Floor
// answers compacted, never a replay with a gap (the watch_gap mutant).
func TestWatchBelowFloorCompacted(t *testing.T) {
	for _, shared := range []bool{false, true} {
		b := newWFBackend()
		i1 := b.put("/demo/k", "a")
		b.put("/demo/k", "b")
		i3 := b.put("/demo/k", "c")
		b.setFloor(i3)
		_, c := wfGateway(t, b, "")
		ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
		if shared { // a reader already runs: the catch-up read meets the Floor
			other := c.Watch(ctx, "/demo/x", clientv3.WithCreatedNotify())
			wfRecv(t, other)
		}
		wc := c.Watch(ctx, "/demo/k", clientv3.WithRev(rev(b.epoch, i1)))
		r := wfRecv(t, wc)
		if !errors.Is(r.Err(), rpctypes.ErrCompacted) || r.CompactRevision != rev(b.epoch, i3) {
			t.Fatalf("shared=%v: got %+v (err %v, events %d), want compacted at %d", shared, r, r.Err(), len(r.Events), rev(b.epoch, i3))
		}
		cancel()
	}
}

// TestWatchOldEpochCompacted: a start revision of an earlier epoch (the
// prefix moved since) answers compacted.
func TestWatchOldEpochCompacted(t *testing.T) {
	b := newWFBackend()
	i := b.put("/demo/k", "a")
	_, c := wfGateway(t, b, "")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	wc := c.Watch(ctx, "/demo/k", clientv3.WithRev(rev(b.epoch-1, i)))
	if r := wfRecv(t, wc); !errors.Is(r.Err(), rpctypes.ErrCompacted) {
		t.Fatalf("got %+v, want compacted", r)
	}
}

// TestWatchEpochChangeCancels: a prefix whose epoch changes under a
// watch (a move) ends it compacted.
func TestWatchEpochChangeCancels(t *testing.T) {
	b := newWFBackend()
	_, c := wfGateway(t, b, "")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	wc := c.Watch(ctx, "/demo/k", clientv3.WithCreatedNotify())
	wfRecv(t, wc)
	b.put("/demo/k", "a")
	wfCollect(t, wc, 1)
	b.mu.Lock()
	b.epoch++
	b.mu.Unlock()
	b.put("/demo/k", "b")
	r := wfRecv(t, wc)
	if !errors.Is(r.Err(), rpctypes.ErrCompacted) || r.CompactRevision <= 0 {
		t.Fatalf("got %+v, want compacted", r)
	}
}

// TestWatchCreateChecksGrant: a watch outside the caller's grant is
// refused permission denied (the feed reads with the proxy's own
// credentials: this check is all that keeps tenants apart).
func TestWatchCreateChecksGrant(t *testing.T) {
	b := newWFBackend()
	_, c := wfGateway(t, b, "bob")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	wc := c.Watch(ctx, "/demo/secret", clientv3.WithCreatedNotify())
	r := wfRecv(t, wc)
	if !errors.Is(r.Err(), rpctypes.ErrPermissionDenied) {
		b.put("/demo/secret", "leaked")
		t.Fatalf("watch outside the grant: got %+v (err %v, events %v), want permission denied", r, r.Err(), r.Events)
	}
	ok := c.Watch(ctx, "/other/mine", clientv3.WithCreatedNotify())
	if r := wfRecv(t, ok); !r.Created || r.Err() != nil {
		t.Fatalf("watch inside the grant: got %+v, err %v", r, r.Err())
	}
}

// TestWatchGrantRecheck: a watch whose grant goes (token revoked) is
// canceled permission denied at the next re-check. (clientv3 drops a
// canceled answer's reason: the raw stream shows it.)
func TestWatchGrantRecheck(t *testing.T) {
	saved := watchTimes
	watchTimes = watchTiming{grantRecheck: 50 * time.Millisecond, progress: time.Hour}
	defer func() { watchTimes = saved }()
	b := newWFBackend()
	_, c := wfGateway(t, b, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	st, err := pb.NewWatchClient(c.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	create := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("/demo/k")}}}
	if err := st.Send(create); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || !r.Created || r.Canceled {
		t.Fatalf("create: %+v %v", r, err)
	}
	b.mu.Lock()
	b.denyAll = true
	b.mu.Unlock()
	r, err := st.Recv()
	if err != nil || !r.Canceled || r.CancelReason != permissionDenied {
		t.Fatalf("after the grant went: %+v %v, want canceled %q", r, err, permissionDenied)
	}
}

// TestWatchProgressNotify: a progress_notify watch with nothing to say
// gets an empty answer at its synced revision; a progress request too.
func TestWatchProgressNotify(t *testing.T) {
	saved := watchTimes
	watchTimes = watchTiming{grantRecheck: time.Hour, progress: 50 * time.Millisecond}
	defer func() { watchTimes = saved }()
	b := newWFBackend()
	_, c := wfGateway(t, b, "")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	wc := c.Watch(ctx, "/demo/k", clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
	wfRecv(t, wc)
	i := b.put("/demo/other", "x") // not in the span: only moves the revision
	for n := 0; n < 200; n++ {
		r := wfRecv(t, wc)
		if !r.IsProgressNotify() {
			t.Fatalf("got %+v, want a progress notification", r)
		}
		if r.Header.Revision == rev(b.epoch, i) {
			return
		}
	}
	t.Fatal("progress never reached the put's revision")
}

// TestWatchCancel: a canceled watch ends and its feed subscription goes.
func TestWatchCancel(t *testing.T) {
	b := newWFBackend()
	g, c := wfGateway(t, b, "")
	ctx, cancel := context.WithCancel(context.Background())
	wc := c.Watch(ctx, "/demo/k", clientv3.WithCreatedNotify())
	wfRecv(t, wc)
	cancel()
	for i := 0; i < 100; i++ {
		g.changes.mu.Lock()
		n := g.changes.nsubs
		g.changes.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the canceled watch still subscribes to the feed")
}

// TestWatchStreamBounds: a stream holds at most MaxWatchesPerStream
// watches; ids are the client's when chosen, unique.
func TestWatchStreamBounds(t *testing.T) {
	ws := &watchStream{watches: map[int64]*watch{}}
	for i := 0; i < MaxWatchesPerStream; i++ {
		if _, ok := ws.add(&watch{}, 0); !ok {
			t.Fatalf("watch %d refused", i)
		}
	}
	if reason, ok := ws.add(&watch{}, 0); ok || !strings.Contains(reason, "MaxWatchesPerStream") {
		t.Fatalf("watch over the bound: ok=%v reason %q", ok, reason)
	}
	ws = &watchStream{watches: map[int64]*watch{}}
	if _, ok := ws.add(&watch{}, 7); !ok {
		t.Fatal("chosen id refused")
	}
	if reason, ok := ws.add(&watch{}, 7); ok || reason != duplicateIDReason {
		t.Fatalf("duplicate id: ok=%v %q", ok, reason)
	}
	counts := newTenantCounts()
	for i := 0; i < MaxWatchStreamsPerCredential; i++ {
		if !counts.take(countWatchStreams, "d", MaxWatchStreamsPerCredential) {
			t.Fatalf("stream %d refused", i)
		}
	}
	if counts.take(countWatchStreams, "d", MaxWatchStreamsPerCredential) {
		t.Fatal("stream over the bound taken")
	}
	counts.give(countWatchStreams, "d")
	if !counts.take(countWatchStreams, "d", MaxWatchStreamsPerCredential) {
		t.Fatal("a stream given back is not available again")
	}
}

// TestWatchChunks: events split at MaxWatchResponseBytes.
func TestWatchChunks(t *testing.T) {
	big := make([]byte, MaxWatchResponseBytes/3)
	var evs []*mvccpb.Event
	for i := 0; i < 7; i++ {
		evs = append(evs, &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte("/k"), Value: big}})
	}
	parts := chunks(evs)
	n := 0
	for _, p := range parts {
		size := 0
		for _, ev := range p {
			size += eventBytes(ev)
		}
		if size > MaxWatchResponseBytes && len(p) > 1 {
			t.Fatalf("part of %d bytes", size)
		}
		n += len(p)
	}
	if n != 7 || len(parts) < 3 {
		t.Fatalf("%d events in %d parts", n, len(parts))
	}
}
