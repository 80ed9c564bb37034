package session

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// waitNow runs WaitAcked for inv and reports whether it returned within
// 50 ms of the synctest bubble's clock (the fake clock does not move
// meanwhile), and how. A wait still
// running is ended by ending the session.
func waitNow(t *testing.T, m *Manager, id uint64, inv Invalidation) (WaitResult, bool) {
	t.Helper()
	type out struct {
		res WaitResult
		err error
	}
	ch := make(chan out, 1)
	go func() { r, err := m.WaitAcked(context.Background(), id, inv); ch <- out{r, err} }()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("WaitAcked: %v", o.err)
		}
		return o.res, true
	case <-time.After(50 * time.Millisecond):
		m.Ended(id)
		<-ch
		return 0, false
	}
}

// An invalidation's deadline is one cache window (api.CacheWindowFor a
// 12 s lease) after the session's last renewal before it was queued; later
// KeepAlives do not move it; an unacknowledged invalidation of the same
// path lends its earlier deadline to a later one; an ack, or the
// acknowledgement of a revoked session's flush, ends the wait at once; a
// deadline that left the client under half a window to answer ends the
// wait as Lapsed, not held against it (FairAckTime);
// without a deadline (the broken build) only the lease does.
func TestInvalidationDeadline(t *testing.T) {
	const id = 7
	// The scene was written for a 9 s window: sec scales its times to the
	// window (sec(9) is one window), the lease stays 12 s.
	w := api.CacheWindowFor(12 * time.Second)
	sec := func(n float64) time.Duration { return time.Duration(n * float64(w) / 9) }
	for _, tc := range []struct {
		name string
		// run sets the scene from the start (t=0, session renewed at
		// sec(1), the invalidation queued at sec(2)) and returns the
		// invalidation to wait for.
		run      func(m *Manager, f *fakeCell, renew func(ack uint64)) Invalidation
		want     WaitResult
		returns  bool
		deadline time.Duration // of the returned invalidation, from the start
	}{
		{"before its deadline: waits", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			inv, _ := m.Invalidate(id, "/p") // queued at +2 s
			f.advance(sec(7.5))
			return inv
		}, 0, false, sec(10)},
		{"past its deadline, lease renewed since: missed", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			inv, _ := m.Invalidate(id, "/p")
			f.advance(sec(7))
			renew(0) // +9 s: the lease runs to +21 s, the deadline stays
			f.advance(sec(1.5))
			return inv
		}, Missed, true, sec(10)},
		{"queued late in the window, unanswered: lapsed, not held against it", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			f.advance(sec(6)) // +8: the deadline +10 leaves 2 of the 4.5 a client is given
			inv, _ := m.Invalidate(id, "/p")
			f.advance(sec(2.5))
			return inv
		}, Lapsed, true, sec(10)},
		{"queued past the window: lapsed at once", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			f.advance(sec(9)) // +11: the client stopped serving at +10
			inv, _ := m.Invalidate(id, "/p")
			return inv
		}, Lapsed, true, sec(10)},
		{"acknowledged", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			inv, _ := m.Invalidate(id, "/p")
			renew(inv.Seq)
			return inv
		}, Acked, true, sec(10)},
		{"a retry borrows the first deadline of its path", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			m.Invalidate(id, "/p") // deadline +10 s
			f.advance(sec(4))
			renew(0) // +6 s
			inv, _ := m.Invalidate(id, "/p")
			f.advance(sec(4.5)) // +10.5 s
			return inv
		}, Missed, true, sec(15)},
		{"another path's deadline is not borrowed", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			m.Invalidate(id, "/q")
			f.advance(sec(4))
			renew(0)
			inv, _ := m.Invalidate(id, "/p")
			f.advance(sec(4.5))
			return inv
		}, 0, false, sec(15)},
		{"an acknowledged invalidation lends nothing", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			first, _ := m.Invalidate(id, "/p")
			f.advance(sec(4))
			renew(first.Seq)
			inv, _ := m.Invalidate(id, "/p")
			f.advance(sec(4.5))
			return inv
		}, 0, false, sec(15)},
		{"a revoked session that acknowledged its flush", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			flush, _ := m.Invalidate(id, "/q")
			m.Flushing(id, flush)
			renew(flush.Seq) // +2 s
			inv, _ := m.Invalidate(id, "/p")
			return inv
		}, Acked, true, sec(11)},
		{"no deadline (broken build): the lease bounds the wait", func(m *Manager, f *fakeCell, renew func(uint64)) Invalidation {
			inv, _ := m.Invalidate(id, "/p")
			inv.Deadline = time.Time{}
			f.advance(12 * time.Second) // the lease renewed at sec(1) ran out 12 s later
			return inv
		}, LeaseOut, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, f := newTestManager(t)
				start := f.Now()
				m.Start(1, caching(id))
				renew := func(ack uint64) {
					t.Helper()
					if _, err := m.Renew(context.Background(), id, 0, Ack{Epoch: 1, Seq: ack}); err != nil {
						t.Fatal(err)
					}
				}
				f.advance(sec(1))
				renew(0)
				f.advance(sec(1))
				inv := tc.run(m, f, renew)
				if tc.deadline != 0 && inv.Deadline.Sub(start.Add(tc.deadline)).Abs() > time.Microsecond {
					t.Fatalf("deadline at +%v, want +%v", inv.Deadline.Sub(start), tc.deadline)
				}
				res, returned := waitNow(t, m, id, inv)
				if returned != tc.returns || (returned && res != tc.want) {
					t.Fatalf("returned=%v res=%v, want returned=%v res=%v", returned, res, tc.returns, tc.want)
				}
				if tc.want == Lapsed && m.Missed() != 0 {
					t.Fatalf("a lapsed deadline counted as missed (%d)", m.Missed())
				}
				if tc.want == Missed && m.Missed() != 1 {
					t.Fatalf("missed deadlines counted %d, want 1", m.Missed())
				}
			})
		})
	}
}

// A session with an invalidation it has not acknowledged is outstanding
// (it may not cache more) until it acknowledges it; the list of pending
// invalidations is bounded.
func TestOutstandingUntilAcknowledged(t *testing.T) {
	m, _ := newTestManager(t)
	m.Start(1, []fsm.SessionInfo{{ID: 7, LeaseMS: 12000, Caches: true}})
	if m.Outstanding(7) {
		t.Fatal("outstanding with nothing queued")
	}
	var last Invalidation
	for i := 0; i < api.MaxPendingEvents+10; i++ {
		last, _ = m.Invalidate(7, "/p")
	}
	if !m.Outstanding(7) {
		t.Fatal("not outstanding with invalidations queued")
	}
	m.mu.Lock()
	n := len(m.leases[7].invals)
	m.mu.Unlock()
	if n > api.MaxPendingEvents {
		t.Fatalf("%d pending invalidations kept, want at most %d", n, api.MaxPendingEvents)
	}
	if _, err := m.Renew(context.Background(), 7, 0, Ack{Epoch: 1, Seq: last.Seq}); err != nil {
		t.Fatal(err)
	}
	if m.Outstanding(7) {
		t.Fatal("outstanding after acknowledging everything")
	}
	if _, ok := m.Invalidate(8, "/p"); ok {
		t.Fatal("an invalidation queued for a session without a lease")
	}
}
