package sdk

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

const electDir = "/demo/elect/svc"

func recvLeader(t *testing.T, ch <-chan LeaderInfo) LeaderInfo {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("observe channel closed")
		}
		return l
	case <-time.After(testWait):
		t.Fatal("no leader change observed")
	}
	return LeaderInfo{}
}

func noLeaderChange(t *testing.T, ch <-chan LeaderInfo, d time.Duration) {
	t.Helper()
	select {
	case l := <-ch:
		t.Fatalf("unexpected leader change %+v", l)
	case <-time.After(d):
	}
}

func TestElection(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c1, c2, co := newTestClient(t, fc, nil), newTestClient(t, fc, nil), newTestClient(t, fc, nil)
		e1, e2, watcher := c1.NewElection(electDir), c2.NewElection(electDir), co.NewElection(electDir)

		if _, err := watcher.Leader(ctx); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("Leader of an empty election: %v", err)
		}
		obs := watcher.Observe(ctx)
		if l := recvLeader(t, obs); l.Node != "" || l.Value != nil || l.Token != 0 {
			t.Fatalf("first observation %+v, want nobody", l)
		}

		if err := e1.Campaign(ctx, []byte("a")); err != nil {
			t.Fatal(err)
		}
		if e1.Context().Err() != nil || e1.Token() == 0 {
			t.Fatal("elected without a live context and token")
		}
		l := recvLeader(t, obs)
		if string(l.Value) != "a" || l.Token != e1.Token() || l.Node == "" {
			t.Fatalf("observed %+v, want a with token %d", l, e1.Token())
		}
		got, err := watcher.Leader(ctx)
		if err != nil || string(got.Value) != "a" || got.Token != e1.Token() || got.Node != l.Node {
			t.Fatalf("Leader = %+v, %v", got, err)
		}
		// Campaign again while leading: returns at once.
		if err := e1.Campaign(ctx, []byte("ignored")); err != nil {
			t.Fatal(err)
		}

		e2Done := make(chan error, 1)
		go func() { e2Done <- e2.Campaign(ctx, []byte("b")) }()
		waitNodes(t, fc, electDir, 2)
		notYet(t, e2Done, 50*time.Millisecond)
		if e2.Context().Err() == nil || e2.Token() != 0 {
			t.Fatal("a waiting candidate looks like a leader")
		}

		// The observer watches the leader's node only (no children watch, no herd).
		so := sessionOf(t, co)
		waitFor(t, "the observer's watch", func() bool {
			return slices.Equal(watchesOf(fc, so.ID()), []watchKey{{l.Node, api.WatchData}})
		})

		if err := e1.Proclaim(ctx, []byte("a2")); err != nil {
			t.Fatal(err)
		}
		if l := recvLeader(t, obs); string(l.Value) != "a2" || l.Node != got.Node {
			t.Fatalf("after Proclaim observed %+v", l)
		}
		if got, err := watcher.Leader(ctx); err != nil || string(got.Value) != "a2" {
			t.Fatalf("Leader after Proclaim = %+v, %v", got, err)
		}
		if e1.Context().Err() != nil {
			t.Fatal("Proclaim cost the leadership")
		}
		if err := e1.Proclaim(ctx, []byte("a3")); err != nil {
			t.Fatalf("second Proclaim: %v", err)
		}
		recvLeader(t, obs)
		notYet(t, e2Done, 50*time.Millisecond) // value changes re-list the next candidate, nothing more

		tok1 := e1.Token()
		if err := e1.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e1.Resign(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second Resign: %v", err)
		}
		if err := e1.Proclaim(ctx, []byte("x")); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Proclaim after Resign: %v", err)
		}
		if err := <-e2Done; err != nil {
			t.Fatal(err)
		}
		if e2.Token() <= tok1 {
			t.Fatalf("new leader's token %d not above %d", e2.Token(), tok1)
		}
		if l := recvLeader(t, obs); string(l.Value) != "b" || l.Token != e2.Token() {
			t.Fatalf("after Resign observed %+v", l)
		}
		if err := e2.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if l := recvLeader(t, obs); l.Node != "" {
			t.Fatalf("after the last Resign observed %+v, want nobody", l)
		}
		if _, err := watcher.Leader(ctx); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("Leader: %v", err)
		}
		// Nobody leads: the observer watches the election's children.
		waitFor(t, "the observer's children watch", func() bool {
			return slices.Equal(watchesOf(fc, so.ID()), []watchKey{{electDir, api.WatchChildren}})
		})
		if err := e1.Campaign(ctx, []byte("c")); err != nil {
			t.Fatal(err)
		}
		if l := recvLeader(t, obs); string(l.Value) != "c" {
			t.Fatalf("observed %+v", l)
		}
		noLeaderChange(t, obs, 50*time.Millisecond)
	})
}

// Observe starts before the election's node exists, and closes at ctx end.
func TestElectionObserveCreatesAndCloses(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c := newTestClient(t, fc, nil)
		octx, cancel := context.WithCancel(ctx)
		obs := c.NewElection("/demo/elect/new").Observe(octx)
		if l := recvLeader(t, obs); l.Node != "" {
			t.Fatalf("%+v", l)
		}
		e := newTestClient(t, fc, nil).NewElection("/demo/elect/new")
		if err := e.Campaign(ctx, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if l := recvLeader(t, obs); string(l.Value) != "v" {
			t.Fatalf("%+v", l)
		}
		cancel()
		select {
		case _, ok := <-obs:
			if ok {
				for range obs {
				}
			}
		case <-time.After(testWait):
			t.Fatal("Observe channel not closed at ctx end")
		}
	})
}

// Pitfall 7: jeopardy means "not leader" at once; leadership is regained
// only after Safe and the node re-checked. A Campaign made meanwhile
// returns when it is.
func TestElectionJeopardy(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c := newTestClient(t, fc, shortLease)
		e := c.NewElection(electDir)
		if err := e.Campaign(ctx, []byte("a")); err != nil {
			t.Fatal(err)
		}
		s := sessionOf(t, c)
		lctx, token := e.Context(), e.Token()
		resume := stallKeepAlives(fc, nil, s.ID())
		select {
		case <-lctx.Done():
		case <-time.After(testWait):
			t.Fatal("leadership context not cancelled on jeopardy")
		}
		if err := e.Proclaim(ctx, []byte("b")); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Proclaim in jeopardy: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- e.Campaign(ctx, []byte("a")) }()
		notYet(t, done, 100*time.Millisecond)
		node := e.mutex().Node()
		reads := lockStateReads(t, fc, node)
		resume()
		if err := recvErr(t, done); err != nil {
			t.Fatal(err)
		}
		if e.Context().Err() != nil || e.Token() != token {
			t.Fatalf("after safe: context %v token %d (want %d)", e.Context().Err(), e.Token(), token)
		}
		if lockStateReads(t, fc, node) <= reads {
			t.Fatal("leadership regained without a LockState re-check")
		}
		if n := len(nodesUnder(fc, electDir)); n != 1 {
			t.Fatalf("%d candidates: the re-Campaign made a second node", n)
		}
	})
}

// Proclaim never re-creates a deleted node (as a persistent one that
// would look like a leader forever).
func TestProclaimAfterNodeDeleted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c, other := newTestClient(t, fc, nil), newTestClient(t, fc, nil)
		e := c.NewElection(electDir)
		if err := e.Campaign(ctx, []byte("a")); err != nil {
			t.Fatal(err)
		}
		node := e.mutex().Node()
		// Delete it and make the change invisible to the monitor: the Proclaim
		// must find out by itself.
		fc.DeleteQuietly(node)
		if err := e.Proclaim(ctx, []byte("b")); !errors.Is(err, ErrLockLost) {
			t.Fatalf("Proclaim on a deleted node: %v", err)
		}
		if _, err := other.Get(ctx, node); !errors.Is(err, ErrNoNode) {
			t.Fatalf("node re-created: %v", err)
		}
		if e.Context().Err() == nil {
			t.Fatal("still leading")
		}
	})
}

func TestMembership(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c1, c2, cw := newTestClient(t, fc, nil), newTestClient(t, fc, nil), newTestClient(t, fc, nil)
		const group = "/demo/groups/workers"

		if ms, err := cw.Members(ctx, group); err != nil || len(ms) != 0 {
			t.Fatalf("Members of a missing group = %v, %v", ms, err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w := cw.WatchMembers(wctx, group)
		recvSet := func() []string {
			t.Helper()
			select {
			case ms, ok := <-w:
				if !ok {
					t.Fatal("WatchMembers closed")
				}
				var out []string
				for _, m := range ms {
					out = append(out, string(m.Value))
				}
				return out
			case <-time.After(testWait):
				t.Fatal("no member set")
			}
			return nil
		}
		if got := recvSet(); len(got) != 0 {
			t.Fatalf("first set %v", got)
		}

		m1, err := c1.Join(ctx, group, []byte("one"))
		if err != nil {
			t.Fatal(err)
		}
		if got := recvSet(); !slices.Equal(got, []string{"one"}) {
			t.Fatalf("set %v", got)
		}
		m2, err := c2.Join(ctx, group, []byte("two"))
		if err != nil {
			t.Fatal(err)
		}
		if got := recvSet(); !slices.Equal(got, []string{"one", "two"}) {
			t.Fatalf("set %v", got)
		}
		m3, err := c1.Join(ctx, group, []byte("three"))
		if err != nil {
			t.Fatal(err)
		}
		if got := recvSet(); !slices.Equal(got, []string{"one", "two", "three"}) {
			t.Fatalf("set %v", got)
		}
		ms, err := cw.Members(ctx, group)
		if err != nil || len(ms) != 3 || ms[0].Node != m1.Node() || ms[1].Node != m2.Node() || ms[2].Node != m3.Node() {
			t.Fatalf("Members = %+v, %v", ms, err)
		}
		n, _ := cw.Get(ctx, m1.Node())
		if !n.Ephemeral {
			t.Fatal("member node not ephemeral")
		}

		if err := m1.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		if got := recvSet(); !slices.Equal(got, []string{"two", "three"}) {
			t.Fatalf("set after Leave %v", got)
		}
		if err := m1.Leave(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second Leave: %v", err)
		}
		// A member whose session ends leaves the group.
		fc.expire(sessionOf(t, c2).ID())
		if got := recvSet(); !slices.Equal(got, []string{"three"}) {
			t.Fatalf("set after expiry %v", got)
		}
		if err := m2.Leave(ctx); err != nil {
			t.Fatalf("Leave of an expired member: %v", err)
		}
		cancel()
		for range w {
		}
	})
}

// Join's create reply is lost and its context ends: the create is resent
// under the same request id and the node it made deleted.
func TestJoinLostReplyLeavesNoGhost(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c := newTestClient(t, fc, nil)
		s := sessionOf(t, c)
		var first atomic.Bool
		first.Store(true)
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route != api.RouteCreate {
				return next()
			}
			status, resp := next()
			if first.Swap(false) {
				time.Sleep(200 * time.Millisecond)
				return fail(api.CodeUnavailable, "reply lost")
			}
			return status, resp
		})
		jctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := c.Join(jctx, "/demo/groups/g", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Join: %v", err)
		}
		// Join returned at its deadline; the member the lost reply made is
		// found (by resending its create) and deleted in the background.
		waitFor(t, "the ghost member to be deleted", func() bool {
			return len(nodesUnder(fc, "/demo/groups/g")) == 0 && s.pendingCleanups() == 0
		})
	})
}

func TestCompareAndSet(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c := newTestClient(t, fc, nil)
		n, err := c.CompareAndSet(ctx, "/demo/cas", []byte("1"), 0)
		if err != nil || n.Version != 1 {
			t.Fatalf("create = %+v, %v", n, err)
		}
		if _, err := c.CompareAndSet(ctx, "/demo/cas", []byte("x"), 0); !errors.Is(err, ErrNodeExists) {
			t.Fatalf("version 0 on an existing node: %v", err)
		}
		if n, err = c.CompareAndSet(ctx, "/demo/cas", []byte("2"), 1); err != nil || n.Version != 2 {
			t.Fatalf("CAS = %+v, %v", n, err)
		}
		if _, err := c.CompareAndSet(ctx, "/demo/cas", []byte("3"), 1); !errors.Is(err, ErrVersionMismatch) {
			t.Fatalf("stale CAS: %v", err)
		}
		if _, err := c.CompareAndSet(ctx, "/demo/none", []byte("3"), 4); !errors.Is(err, ErrNoNode) {
			t.Fatalf("CAS on a missing node: %v", err)
		}
		got, _ := c.Get(ctx, "/demo/cas")
		if string(got.Value) != "2" {
			t.Fatalf("value %q", got.Value)
		}
	})
}

// A Campaign right after the candidate's session expired campaigns
// afresh: the old grant, not yet marked lost by its monitor, is not a
// campaign in progress (lockctl elect exited bad_request here).
func TestCampaignAfterExpiry(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c := newTestClient(t, fc, shortLease)
		e := c.NewElection(electDir)
		if err := e.Campaign(ctx, []byte("a")); err != nil {
			t.Fatal(err)
		}
		s := sessionOf(t, c)
		fc.expire(s.ID())
		s.end(api.Errorf(api.CodeSessionExpired, "expired")) // as its KeepAlive would learn; its grant's monitor has not run yet
		if err := e.Campaign(ctx, []byte("b")); err != nil {
			t.Fatalf("Campaign after the session expired: %v", err)
		}
		if e.Context().Err() != nil || e.Token() == 0 {
			t.Fatalf("not leading after the new campaign: %v", e.Context().Err())
		}
	})
}
