package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
)

// asyncCall is one RenewAsync's answer, however it came.
type asyncCall struct {
	mu     sync.Mutex
	r      Renewal
	err    error
	calls  atomic.Int32 // times done ran
	parked bool
}

func renewAsync(m *Manager, id uint64, wait time.Duration) *asyncCall {
	c := &asyncCall{}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, parked, err := m.RenewAsync(context.Background(), id, wait, Ack{}, func(r Renewal, err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.r, c.err = r, err
		c.calls.Add(1)
	})
	if !parked {
		c.r, c.err = r, err
	}
	c.parked = parked
	return c
}

// answer is the call's answer so far.
func (c *asyncCall) answer() (Renewal, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r, c.err, c.parked
}

// TestRenewAsyncWakes: a parked KeepAlive holds no goroutine, and is
// answered exactly once by whatever ends its wait, with what a Renew
// waiting on it would have answered.
func TestRenewAsyncWakes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wake    func(m *Manager)
		wantErr error // nil: answered with a renewal
		events  int
	}{
		{"event", func(m *Manager) { m.Deliver(7, api.Event{Type: api.EventDeleted, Path: "/demo/x", Index: 9}) }, nil, 1},
		{"newer keepalive", func(m *Manager) { _, _, _ = m.KeepAlive(context.Background(), 7, 0) }, nil, 0},
		{"wait over", func(m *Manager) { time.Sleep(6 * time.Second) }, nil, 0},
		{"leadership ends", func(m *Manager) { m.Stop() }, api.ErrNotLeader, 0},
		{"session ends", func(m *Manager) { m.Ended(7) }, api.ErrSessionExpired, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, f := newTestManager(t)
				m.Start(1, f.sessions(7))
				c := renewAsync(m, 7, 5*time.Second)
				if _, err, parked := c.answer(); !parked || err != nil {
					t.Fatalf("parked %v, err %v: want parked", parked, err)
				}
				synctest.Wait()
				if n := c.calls.Load(); n != 0 {
					t.Fatalf("answered %d times before its wake-up", n)
				}
				tc.wake(m)
				synctest.Wait()
				if n := c.calls.Load(); n != 1 {
					t.Fatalf("answered %d times, want once", n)
				}
				r, err, _ := c.answer()
				if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
					t.Fatalf("answer %v, want %v", err, tc.wantErr)
				}
				if len(r.Events) != tc.events {
					t.Fatalf("%d events, want %d", len(r.Events), tc.events)
				}
				// Nothing fires it a second time.
				m.Deliver(7, api.Event{Type: api.EventDeleted, Path: "/demo/y", Index: 10})
				time.Sleep(10 * time.Second)
				synctest.Wait()
				if n := c.calls.Load(); n != 1 {
					t.Fatalf("answered %d times in all, want once", n)
				}
			})
		})
	}
}

// TestRenewAsyncAnswersAtOnce: with events waiting, no wait asked, or an
// error, RenewAsync answers without parking and never calls done.
func TestRenewAsyncAnswersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		if c := renewAsync(m, 7, time.Second); c.parked || !errors.Is(c.err, api.ErrNotLeader) {
			t.Fatalf("inactive: parked %v err %v", c.parked, c.err)
		}
		m.Start(1, f.sessions(7))
		if c := renewAsync(m, 7, 0); c.parked || c.err != nil {
			t.Fatalf("no wait: parked %v err %v", c.parked, c.err)
		}
		m.Deliver(7, api.Event{Type: api.EventDeleted, Path: "/demo/x", Index: 9})
		c := renewAsync(m, 7, time.Second)
		if c.parked || c.err != nil || len(c.r.Events) != 1 {
			t.Fatalf("events waiting: parked %v err %v events %v", c.parked, c.err, c.r.Events)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if c.calls.Load() != 0 {
			t.Fatal("done called for an answer given at once")
		}
	})
}

// TestConcurrentFirstRenewalsAllAnswered: two first KeepAlives of a
// session under a new leader (a client's retry after a fail-over) both
// wait for the confirmation with the manager's lock let go; whichever
// parks last supersedes the other, which is answered then: neither is
// left unanswered (its connection held forever).
func TestConcurrentFirstRenewalsAllAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(7)) // not confirmed under epoch 1: the first renewal confirms
		calls := make(chan *asyncCall, 2)
		for range 2 {
			go func() { calls <- renewAsync(m, 7, 5*time.Second) }()
		}
		a, b := <-calls, <-calls
		time.Sleep(20 * time.Second)
		synctest.Wait()
		for i, c := range []*asyncCall{a, b} {
			if _, _, parked := c.answer(); parked && c.calls.Load() != 1 {
				t.Errorf("call %d: parked, answered %d times, want once", i, c.calls.Load())
			}
		}
	})
}
