package session

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
)

// TestBatchRenewsFromTheClientsLastKeepAlive: a proxy's batch extends
// each lease from when its client last spoke (now − age), never shortens
// one, and a client that stopped speaking expires a lease after it did.
func TestBatchRenewsFromTheClientsLastKeepAlive(t *testing.T) {
	m, f := newTestManager(t)
	m.Start(1, f.sessions(1, 2))
	f.advance(6 * time.Second)
	r, err := m.RenewBatch(context.Background(), "p1", 1, []BatchEntry{{Session: 1, Age: 0}, {Session: 2, Age: 5 * time.Second}, {Session: 9}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Renewed) != 2 || len(r.Unknown) != 1 || r.Unknown[0] != 9 || r.Epoch != 1 {
		t.Fatalf("renewal %+v", r)
	}
	// Session 2's client last spoke 5 s before the batch (1 s after the
	// start): its lease ends 13 s after the start, session 1's at 18 s.
	f.advance(7500 * time.Millisecond)
	if got := expireDue(m); len(got) != 1 || got[0] != 2 {
		t.Fatalf("expired %v, want [2]", got)
	}
	// An older age does not shorten a lease.
	if _, err := m.RenewBatch(context.Background(), "p1", 1, []BatchEntry{{Session: 1, Age: 11 * time.Second}}, 0); err != nil {
		t.Fatal(err)
	}
	f.advance(4 * time.Second) // 17.5 s after the start
	if got := expireDue(m); len(got) != 0 {
		t.Fatalf("expired %v: a batch with an old age shortened a lease", got)
	}
	f.advance(time.Second)
	if got := expireDue(m); len(got) != 1 || got[0] != 1 {
		t.Fatalf("expired %v, want [1]", got)
	}
}

// TestBatchAcksAndWakes: acknowledgements drop events; the batch reports
// only sessions with events the proxy has not seen (or new ones), waits
// for one otherwise, and an event for any of its sessions ends the wait.
func TestBatchAcksAndWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(1, 2, 3))
		ctx := context.Background()
		m.Deliver(1, api.Event{Type: api.EventDeleted, Path: "/demo/a"})
		m.Deliver(1, api.Event{Type: api.EventDeleted, Path: "/demo/b"})
		r, err := m.RenewBatch(ctx, "p1", 1, []BatchEntry{{Session: 1}, {Session: 2}, {Session: 3, New: true}}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Reports) != 2 || r.Reports[0].Session != 1 || len(r.Reports[0].Events) != 2 || r.Reports[1].Session != 3 || r.Reports[1].LeaseMS != 12000 {
			t.Fatalf("reports %+v", r.Reports)
		}
		seq := r.Reports[0].Events[1].Seq
		// The proxy has seen both, its client acknowledged the first: the
		// batch waits, and an event for session 2 ends the wait.
		done := make(chan BatchRenewal, 1)
		go func() {
			r, err := m.RenewBatch(ctx, "p1", 1, []BatchEntry{{Session: 1, Ack: Ack{1, seq - 1}, Seen: seq}, {Session: 2}, {Session: 3}}, time.Minute)
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		synctest.Wait() // the batch waits
		select {
		case r := <-done:
			t.Fatalf("reports %+v (delivered false)", r.Reports)
		default:
		}
		m.Deliver(2, api.Event{Type: api.EventDeleted, Path: "/demo/c"})
		synctest.Wait()
		select {
		case r := <-done:
			if len(r.Reports) != 1 || r.Reports[0].Session != 2 {
				t.Fatalf("reports %+v (delivered true)", r.Reports)
			}
		default:
			t.Fatal("the batch did not wake")
		}
		// Session 1's first event is gone; the second waits for its ack.
		r2, err := m.RenewBatch(ctx, "p1", 1, []BatchEntry{{Session: 1, New: true}}, 0)
		if err != nil || len(r2.Reports[0].Events) != 1 || r2.Reports[0].Events[0].Seq != seq {
			t.Fatalf("after the ack: %+v %v", r2, err)
		}
	})
}

// TestBatchUnderANewLeader: first renewals under a new leader are
// confirmed in the state before the batch answers, and a stopped manager
// answers not_leader.
func TestBatchUnderANewLeader(t *testing.T) {
	m, f := newTestManager(t)
	f.leaderStart()
	m.Start(f.epoch, f.sessions(1, 2))
	if _, err := m.RenewBatch(context.Background(), "p1", 0, []BatchEntry{{Session: 1}, {Session: 2}}, 0); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	confirms, c1, c2 := f.confirms, f.confirmed[1], f.confirmed[2]
	f.mu.Unlock()
	if confirms != 1 || c1 != f.epoch || c2 != f.epoch {
		t.Fatalf("%d confirm entries, confirmed %d %d; want one entry for both", confirms, c1, c2)
	}
	m.Stop()
	if _, err := m.RenewBatch(context.Background(), "p1", 0, []BatchEntry{{Session: 1}}, 0); !errors.Is(err, api.ErrNotLeader) {
		t.Fatalf("stopped: %v", err)
	}
}

// TestBatchPollGetsTheProxysEvents: a batch that renews nothing (a
// proxy's poll between full renewals) waits for an event of any session
// that proxy renewed last, and is not woken by another proxy's.
func TestBatchPollGetsTheProxysEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(1, 2))
		ctx := context.Background()
		if _, err := m.RenewBatch(ctx, "p1", 1, []BatchEntry{{Session: 1}}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := m.RenewBatch(ctx, "p2", 1, []BatchEntry{{Session: 2}}, 0); err != nil {
			t.Fatal(err)
		}
		done := make(chan BatchRenewal, 1)
		go func() {
			r, err := m.RenewBatch(ctx, "p1", 1, nil, time.Minute)
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		synctest.Wait() // p1's poll waits
		m.Deliver(2, api.Event{Type: api.EventDeleted, Path: "/demo/other"})
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("p1's poll woke for p2's session: %+v", r)
		default:
		}
		m.Deliver(1, api.Event{Type: api.EventDeleted, Path: "/demo/mine"})
		synctest.Wait()
		select {
		case r := <-done:
			if len(r.Reports) != 1 || r.Reports[0].Session != 1 || len(r.Reports[0].Events) != 1 || len(r.Renewed) != 0 {
				t.Fatalf("poll %+v", r)
			}
		default:
			t.Fatal("p1's poll did not wake for its session's event")
		}
		// Session 1 moves to p2 (its client changed proxy): p2 hears of it.
		if _, err := m.RenewBatch(ctx, "p2", 1, []BatchEntry{{Session: 1, Seen: 1 << 40}}, 0); err != nil {
			t.Fatal(err)
		}
		m.Deliver(1, api.Event{Type: api.EventDeleted, Path: "/demo/again"})
		r, err := m.RenewBatch(ctx, "p2", 1, nil, time.Minute)
		if err != nil || len(r.Reports) == 0 {
			t.Fatalf("p2 poll: %+v %v", r, err)
		}
	})
}

// A batch reply carries at most api.MaxBatchReplyEvents events; the
// sessions left out get theirs in the next reply, none lost.
func TestBatchReplyEventsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		const n = api.MaxBatchReplyEvents/api.MaxPendingEvents + 2
		ids := make([]uint64, n)
		entries := make([]BatchEntry, n)
		for i := range ids {
			ids[i] = uint64(i + 1)
			entries[i] = BatchEntry{Session: ids[i]}
		}
		m.Start(1, f.sessions(ids...))
		ctx := context.Background()
		if _, err := m.RenewBatch(ctx, "p1", 1, entries, 0); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			for range api.MaxPendingEvents - 1 {
				m.Deliver(id, api.Event{Type: api.EventDataChanged, Path: "/demo/x"})
			}
		}
		got := map[uint64]int{}
		for round := 0; round < 4 && len(got) < n; round++ {
			r, err := m.RenewBatch(ctx, "p1", 1, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, s := range r.Reports {
				total += len(s.Events)
				if len(s.Events) > 0 {
					got[s.Session] = len(s.Events)
				}
			}
			if total > api.MaxBatchReplyEvents {
				t.Fatalf("round %d: one reply carries %d events, over %d", round, total, api.MaxBatchReplyEvents)
			}
		}
		if len(got) != n {
			t.Fatalf("after 4 replies, %d of %d sessions got their events", len(got), n)
		}
	})
}
