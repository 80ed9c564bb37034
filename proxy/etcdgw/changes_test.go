package etcdgw

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

func wfFeed(t *testing.T, b *wfBackend) *changeFeed {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return newChangeFeed(ctx, b)
}

var wfDemo = PrefixInfo{Prefix: "/demo", Cell: "c1", Epoch: 3}

// TestWaitGone: waitGone returns on the delete of its node after the
// index, not on other changes; at once for a node already gone.
func TestWaitGone(t *testing.T) {
	b := newWFBackend()
	f := wfFeed(t, b)
	after := b.put("/demo/n", "x")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.waitGone(ctx, wfDemo, "/demo/n", after) }()
	b.put("/demo/other", "y")
	b.put("/demo/n", "z")
	select {
	case err := <-done:
		t.Fatalf("returned before the delete: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	b.del("/demo/n")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Already deleted (before the wait began, after the index).
	if err := f.waitGone(ctx, wfDemo, "/demo/n", after); err != nil {
		t.Fatal(err)
	}
}

// TestWaitChange: the first change in the span after the index, never
// a container, never one outside.
func TestWaitChange(t *testing.T) {
	b := newWFBackend()
	f := wfFeed(t, b)
	after := b.put("/demo/e/a", "x")
	b.apply(api.ChangePut, api.Node{Path: "/demo/e/dir", Container: true})
	b.put("/demo/f", "no")
	want := b.put("/demo/e/b", "y")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	got, err := f.waitChange(ctx, wfDemo, "/demo/e/", "/demo/e0", after)
	if err != nil || got != want {
		t.Fatalf("waitChange = %d, %v; want %d", got, err, want)
	}
}

// TestWaitChangeGapPolls: a gap in the ring falls back to range reads,
// which still see the change.
func TestWaitChangeGapPolls(t *testing.T) {
	b := newWFBackend()
	f := wfFeed(t, b)
	after := b.put("/demo/e/a", "x")
	b.put("/demo/e/a", "y")
	b.setFloor(b.index + 1)
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	got, err := f.waitChange(ctx, wfDemo, "/demo/e/", "/demo/e0", after)
	if err != nil || got <= after {
		t.Fatalf("waitChange = %d, %v; want an index above %d", got, err, after)
	}
}

// TestFeedSharedReader: subscribers of one prefix share one reader; it
// stops with the last; a late subscriber catches up from below the
// reader's position without a gap or a repeat.
func TestFeedSharedReader(t *testing.T) {
	b := newWFBackend()
	f := wfFeed(t, b)
	i1 := b.put("/demo/a", "1")
	s1, err := f.open(wfDemo, i1+1, 3)
	if err != nil {
		t.Fatal(err)
	}
	i2 := b.put("/demo/a", "2")
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	wfUntil(t, ctx, s1, i2)
	s2, err := f.open(wfDemo, i1, 3) // below the reader: catches up
	if err != nil {
		t.Fatal(err)
	}
	i3 := b.put("/demo/a", "3")
	got := wfUntil(t, ctx, s2, i3)
	if len(got) != 3 || got[0] != i1 || got[1] != i2 || got[2] != i3 {
		t.Fatalf("late subscriber saw %v, want [%d %d %d]", got, i1, i2, i3)
	}
	f.mu.Lock()
	n := len(f.readers)
	f.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d readers for one prefix", n)
	}
	s1.close()
	s2.close()
	f.mu.Lock()
	n = len(f.readers)
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d readers after the last subscriber left", n)
	}
}

// wfUntil reads s until it passed index, returning the change indexes.
func wfUntil(t *testing.T, ctx context.Context, s *feedStream, index uint64) []uint64 {
	t.Helper()
	var out []uint64
	for i := 0; s.position() <= index && i < 100; i++ {
		bt, err := s.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range bt.changes {
			out = append(out, c.Index)
		}
	}
	return out
}

// TestFeedOverflow: a subscriber that does not read is dropped with
// errFeedOverflow; the others go on.
func TestFeedOverflow(t *testing.T) {
	b := newWFBackend()
	f := wfFeed(t, b)
	slow, err := f.open(wfDemo, b.index+1, 3)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := f.open(wfDemo, b.index+1, 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wfWithin)
	defer cancel()
	var last uint64
	for i := 0; i < 3*feedSubQueue; i++ {
		last = b.put("/demo/a", "v")
		wfUntil(t, ctx, fast, last) // one batch per put: the slow one's queue fills
	}
	var err2 error
	for i := 0; i < 4*feedSubQueue && err2 == nil; i++ {
		_, err2 = slow.read(ctx)
	}
	if !errors.Is(err2, errFeedOverflow) {
		t.Fatalf("slow subscriber: %v, want overflow", err2)
	}
	slow.close()
	fast.close()
}

// TestFeedBounds: MaxFeedReaders readers at most.
func TestFeedBounds(t *testing.T) {
	f := wfFeed(t, newWFBackend())
	f.readers = make(map[feedKey]*feedReader)
	for i := 0; i < MaxFeedReaders; i++ {
		f.readers[feedKey{cell: "x", root: string(rune('a' + i))}] = &feedReader{}
	}
	if _, _, err := f.subscribe(wfDemo, 1); api.CodeOf(err) != api.CodeLimitExceeded {
		t.Fatalf("subscribe past MaxFeedReaders: %v", err)
	}
}

// TestBatchOf: Floor above from is compacted; More leaves the last
// index's changes for the next read, unless they fill the read.
func TestBatchOf(t *testing.T) {
	ch := func(i uint64) api.Change { return api.Change{Index: i} }
	cases := []struct {
		name    string
		from    uint64
		resp    api.ChangesResponse
		through uint64
		n       int
		err     error
	}{
		{"plain", 5, api.ChangesResponse{Floor: 1, Index: 9, Changes: []api.Change{ch(5), ch(7)}}, 9, 2, nil},
		{"nothing new", 10, api.ChangesResponse{Floor: 1, Index: 9}, 9, 0, nil},
		{"below floor", 3, api.ChangesResponse{Floor: 4, Index: 9}, 0, 0, errFeedCompacted},
		{"more: through the last index read (a cell never cuts one)", 5, api.ChangesResponse{Floor: 1, Index: 20, More: true, Changes: []api.Change{ch(5), ch(7), ch(7)}}, 7, 3, nil},
	}
	for _, c := range cases {
		b, err := batchOf(c.from, &c.resp)
		if !errors.Is(err, c.err) || (err == nil && (b.through != c.through || len(b.changes) != c.n)) {
			t.Errorf("%s: through %d, %d changes, err %v; want %d, %d, %v", c.name, b.through, len(b.changes), err, c.through, c.n, c.err)
		}
	}
}
