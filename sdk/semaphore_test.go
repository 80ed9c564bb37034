package sdk

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

const semDir = "/demo/locks/pool"

// acquireAsync runs s.Acquire in the background; the channel gets its
// result.
func acquireAsync(ctx context.Context, s *Semaphore) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Acquire(ctx) }()
	return ch
}

// TestSemaphoreReleaseWakesOne: two permits; a and b hold at once, c and
// d wait. a's release grants c alone: c is woken once, d not at all (no
// wake-up, no re-list). Tokens rise with every grant.
func TestSemaphoreReleaseWakesOne(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		var sems [4]*Semaphore
		for i := range sems {
			sems[i] = newTestClient(t, fc, nil).NewSemaphore(semDir, 2)
		}
		a, b, c, d := sems[0], sems[1], sems[2], sems[3]
		for _, s := range []*Semaphore{a, b} {
			if err := s.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !a.Held() || !b.Held() || b.Token() <= a.Token() || a.Context().Err() != nil || !strings.HasPrefix(api.Base(a.Node()), PermitNodePrefix) {
			t.Fatalf("holders: a %v/%d %q, b %v/%d", a.Held(), a.Token(), a.Node(), b.Held(), b.Token())
		}
		cDone := acquireAsync(ctx, c)
		waitNodes(t, fc, semDir, 3)
		dDone := acquireAsync(ctx, d)
		names := waitNodes(t, fc, semDir, 4)
		notYet(t, cDone, 50*time.Millisecond)
		dNode := api.Join(semDir, names[3])
		dReads := lockStateReads(t, fc, dNode)

		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := recvErr(t, cDone); err != nil {
			t.Fatal(err)
		}
		notYet(t, dDone, 100*time.Millisecond)
		if c.Token() <= b.Token() || c.Wakeups() != 1 || d.Wakeups() != 0 {
			t.Fatalf("c token %d after %d, wake-ups c %d d %d; want 1 and 0", c.Token(), b.Token(), c.Wakeups(), d.Wakeups())
		}
		if n := lockStateReads(t, fc, dNode); n != dReads {
			t.Fatalf("d re-listed %d times on a release that did not grant it", n-dReads)
		}
		if err := c.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := recvErr(t, dDone); err != nil {
			t.Fatal(err)
		}
		if d.Token() <= c.Token() || d.Wakeups() != 1 {
			t.Fatalf("d: token %d (after %d), wake-ups %d", d.Token(), c.Token(), d.Wakeups())
		}
		for _, s := range []*Semaphore{b, d} {
			if err := s.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		waitNodes(t, fc, semDir, 0)
	})
}

// TestSemaphoreRefusals: an N out of range fails with ErrBadRequest
// before anything is sent; an N other than the semaphore's, or a Mutex at
// its path, fails with ErrPermitsMismatch and leaves no node behind.
func TestSemaphoreRefusals(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		cl := newTestClient(t, fc, nil)
		holder := cl.NewSemaphore(semDir, 3)
		if err := holder.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name    string
			acquire func() error
			want    error
		}{
			{"N of 0", func() error { return cl.NewSemaphore(semDir, 0).Acquire(ctx) }, ErrBadRequest},
			{"N past MaxPermits", func() error { return cl.NewSemaphore(semDir, api.MaxPermits+1).Acquire(ctx) }, ErrBadRequest},
			{"another N", func() error { return cl.NewSemaphore(semDir, 4).Acquire(ctx) }, ErrPermitsMismatch},
			{"a mutex at a semaphore", func() error { return cl.NewMutex(semDir).Lock(ctx) }, ErrPermitsMismatch},
		}
		for _, tc := range cases {
			if err := tc.acquire(); !errors.Is(err, tc.want) {
				t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
			}
			if names := nodesUnder(fc, semDir); len(names) != 1 {
				t.Fatalf("%s: left nodes %v", tc.name, names)
			}
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSemaphoreContextJeopardy: a permit's Context is cancelled as soon as
// its session falls into jeopardy (as a Mutex's is), the permit keeps its
// node and token through it, and after the session is safe again a fresh
// Context is live while the old one stays cancelled.
func TestSemaphoreContextJeopardy(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		c := newTestClient(t, fc, shortLease)
		s := c.NewSemaphore(semDir, 3)
		if err := s.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		sess := sessionOf(t, c)
		permitCtx, node, token := s.Context(), s.Node(), s.Token()
		if permitCtx.Err() != nil {
			t.Fatal("context not live after Acquire")
		}
		resume := stallKeepAlives(fc, nil, sess.ID())
		select {
		case <-permitCtx.Done():
		case <-time.After(testWait):
			t.Fatal("permit context not cancelled on jeopardy")
		}
		if !sess.InJeopardy() || s.Context().Err() == nil {
			t.Fatalf("jeopardy %v, fresh context %v: want a cancelled context in jeopardy", sess.InJeopardy(), s.Context().Err())
		}
		resume()
		waitFor(t, "safe", func() bool { return !sess.InJeopardy() })
		if s.Context().Err() != nil || permitCtx.Err() == nil {
			t.Fatalf("after safe: fresh context %v, old one %v", s.Context().Err(), permitCtx.Err())
		}
		if !s.Held() || s.Token() != token || s.Node() != node {
			t.Fatalf("after safe: held %v token %d node %s, want %d %s", s.Held(), s.Token(), s.Node(), token, node)
		}
		if err := s.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
