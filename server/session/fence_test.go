package session

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/server/fsm"
)

// The fence is per node (finding 11): a change waits only for the
// sessions whose committed record holds one of its nodes and that have
// not seen this epoch; a session without a record (it cached before
// records) holds every node; a seal holds what any record holds under
// its prefix; nobody is granted a fenced node.
func TestFenceIsPerNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newTestManager(t)
		m.Start(4, []fsm.SessionInfo{
			{ID: 7, LeaseMS: 12000, Caches: true, Cached: []string{"/demo/a"}, CachedEpoch: 3},
			{ID: 8, LeaseMS: 12000, Caches: true, Cached: []string{"/other/b"}, CachedEpoch: 2},
			{ID: 9, LeaseMS: 12000},
		})
		fenced := func(s Scope) bool {
			done, err := returnsWithin(50*time.Millisecond, func() error { return m.WaitFencedFor(context.Background(), s) })
			if done && err != nil {
				t.Fatal(err)
			}
			return !done
		}
		for _, tc := range []struct {
			scope Scope
			held  bool
		}{
			{Scope{Paths: []string{"/demo/a"}}, true},
			{Scope{Paths: []string{"/demo/c", "/demo/a"}}, true},
			{Scope{Paths: []string{"/demo/c"}}, false},
			{Scope{Paths: []string{"/demo"}}, false},
			{Scope{Under: "/demo"}, true},
			{Scope{Under: "/demox"}, false},
			{Scope{Under: "/other"}, true},
		} {
			if got := fenced(tc.scope); got != tc.held {
				t.Errorf("%+v: held %v, want %v", tc.scope, got, tc.held)
			}
		}
		if m.MayGrant(9, "/demo/a") || !m.MayGrant(9, "/demo/c") {
			t.Error("a fenced node was granted, or a free one refused")
		}
		if m.MayGrant(7, "/demo/c") {
			t.Error("a session yet to see the epoch was granted a node")
		}
		if _, err := m.Renew(context.Background(), 7, 0, Ack{Epoch: 4}); err != nil {
			t.Fatal(err)
		}
		if fenced(Scope{Paths: []string{"/demo/a"}}) || !m.MayGrant(7, "/demo/a") {
			t.Error("a node still fenced after its only cacher saw the epoch")
		}
		if !fenced(Scope{Under: "/other"}) {
			t.Error("session 8's node freed by another session's ack")
		}
		// A session that cached before records existed holds everything.
		m.Start(5, []fsm.SessionInfo{{ID: 10, LeaseMS: 12000, Caches: true}})
		if !fenced(Scope{Paths: []string{"/anything"}}) {
			t.Error("a session without a record does not hold every node")
		}
	})
}

// A restored cell's first leader holds every node for a cache window
// (HoldAll); mutant lockd_broken_restorehold holds nothing.
func TestRestoredLeaderHoldsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Config{Expire: func(context.Context, uint64, uint64) error { return nil }, CheckEvery: time.Hour, TickEvery: time.Hour, CacheWindow: 300 * time.Millisecond})
		t.Cleanup(m.Close)
		m.Start(1<<32, nil)
		m.HoldAll()
		if done, _ := returnsWithin(50*time.Millisecond, func() error {
			return m.WaitFencedFor(context.Background(), Scope{Paths: []string{"/demo/x"}})
		}); done {
			t.Fatal("a restored cell's first leader let a change through at once")
		}
		if m.MayGrant(1, "/demo/x") {
			t.Fatal("granted during the hold")
		}
		if done, err := returnsWithin(5*time.Second, func() error {
			return m.WaitFencedFor(context.Background(), Scope{Paths: []string{"/demo/x"}})
		}); !done || err != nil {
			t.Fatalf("done=%v err=%v: the hold must end with the cache window", done, err)
		}
	})
}
