package session

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
)

// waitPolling blocks until session id has a KeepAlive waiting. It runs in
// a synctest bubble and sleeps on the bubble's clock only: a first renewal
// under a leader waits for the confirm batch (ConfirmDelay) before it
// parks.
func waitPolling(t *testing.T, m *Manager, id uint64) {
	t.Helper()
	for range 100 {
		synctest.Wait()
		m.mu.Lock()
		l := m.leases[id]
		waiting := l != nil && l.wake != nil
		m.mu.Unlock()
		if waiting {
			return
		}
		time.Sleep(m.cfg.ConfirmDelay)
	}
	t.Fatal("no keepalive waiting")
}

func TestEventSurvivesLostReply(t *testing.T) {
	m, f := newTestManager(t)
	m.Start(1, f.sessions(7))
	m.Deliver(7, api.Event{Type: api.EventDeleted, Path: "/demo/x", Index: 9})
	evs, _, err := m.KeepAlive(context.Background(), 7, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("first keepalive: %v %v", evs, err)
	}
	// That reply was lost: the client never saw it, so never acknowledged it.
	evs, _, err = m.KeepAlive(context.Background(), 7, 0)
	if err != nil || len(evs) != 1 || evs[0].Path != "/demo/x" {
		t.Fatalf("resent keepalive: %v %v; want the deleted event again", evs, err)
	}
	// A long-poll with an unacknowledged event returns it at once.
	r, err := m.Renew(context.Background(), 7, time.Minute, Ack{Epoch: 1, Seq: evs[0].Seq - 1})
	if err != nil || len(r.Events) != 1 || r.Events[0].Seq != evs[0].Seq {
		t.Fatalf("long-poll: %+v %v; want the same event again", r, err)
	}
}

func TestNewerKeepAliveReleasesOlder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(7))
		older := make(chan error, 1)
		go func() {
			_, _, err := m.KeepAlive(context.Background(), 7, 30*time.Second)
			older <- err
		}()
		waitPolling(t, m, 7)
		if _, _, err := m.KeepAlive(context.Background(), 7, 0); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case err := <-older:
			if err != nil {
				t.Fatalf("older keepalive: %v", err)
			}
		default:
			t.Fatal("a newer keepalive did not release the older one")
		}
		m.Deliver(7, api.Event{Type: api.EventDeleted, Path: "/demo/x", Index: 9})
		evs, _, err := m.KeepAlive(context.Background(), 7, 0)
		if err != nil || len(evs) != 1 {
			t.Fatalf("event after release: %v %v", evs, err)
		}
	})
}

func TestKeepAliveWaitCappedAtHalfLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions())
		m.Opened(9, 1000)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, _, err := m.KeepAlive(ctx, 9, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatal("a 1 s lease's keepalive was held past 10 s; want at most lease/2")
		}
	})
}

func TestManagerChangedUnderKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(7))
		errc := make(chan error, 1)
		go func() {
			_, _, err := m.KeepAlive(context.Background(), 7, 30*time.Second)
			errc <- err
		}()
		waitPolling(t, m, 7)
		m.Start(2, f.sessions(7)) // leadership changed and came back while it waited
		synctest.Wait()
		select {
		case err := <-errc:
			if !errors.Is(err, api.ErrUnavailable) && !errors.Is(err, api.ErrNotLeader) {
				t.Fatalf("got %v, want unavailable or not_leader", err)
			}
		default:
			t.Fatal("keepalive not released")
		}
	})
}

func TestAckDropsEvents(t *testing.T) {
	m, f := newTestManager(t)
	m.Start(1, f.sessions(7))
	ctx := context.Background()
	for i := uint64(1); i <= 3; i++ {
		m.Deliver(7, api.Event{Type: api.EventDeleted, Path: "/demo/x", Index: 10 + i})
	}
	r, err := m.Renew(ctx, 7, 0, Ack{})
	if err != nil || len(r.Events) != 3 || r.Epoch != 1 {
		t.Fatalf("renew: %+v %v", r, err)
	}
	for i := 1; i < len(r.Events); i++ {
		if r.Events[i].Seq <= r.Events[i-1].Seq {
			t.Fatalf("seqs not increasing: %+v", r.Events)
		}
	}
	tests := []struct {
		name string
		ack  Ack
		want int
	}{
		{"ack of another leadership is ignored", Ack{Epoch: 9, Seq: r.Events[2].Seq}, 3},
		{"ack of the first drops it", Ack{Epoch: 1, Seq: r.Events[0].Seq}, 2},
		{"repeated ack changes nothing", Ack{Epoch: 1, Seq: r.Events[0].Seq}, 2},
		{"ack of the last drops all", Ack{Epoch: 1, Seq: r.Events[2].Seq}, 0},
	}
	for _, tc := range tests {
		got, err := m.Renew(ctx, 7, 0, tc.ack)
		if err != nil || len(got.Events) != tc.want {
			t.Fatalf("%s: %d events (%v), want %d", tc.name, len(got.Events), err, tc.want)
		}
	}
}

func TestOverflowResyncWithSeqs(t *testing.T) {
	m, f := newTestManager(t)
	m.Start(1, f.sessions(7))
	ctx := context.Background()
	m.Deliver(7, api.Event{Type: api.EventDataChanged, Path: "/demo/x", Index: 1})
	first, err := m.Renew(ctx, 7, 0, Ack{})
	if err != nil || len(first.Events) != 1 {
		t.Fatalf("renew: %+v %v", first, err)
	}
	// The client processed the first event but its ack never came; the
	// queue overflows.
	for i := 0; i < api.MaxPendingEvents+10; i++ {
		m.Deliver(7, api.Event{Type: api.EventDataChanged, Path: "/demo/x", Index: uint64(i + 2)})
	}
	r, err := m.Renew(ctx, 7, 0, Ack{Epoch: 1, Seq: first.Events[0].Seq})
	if err != nil || len(r.Events) == 0 || len(r.Events) > 11 {
		t.Fatalf("after overflow: %d events, %v", len(r.Events), err)
	}
	if r.Events[0].Type != api.EventResync || r.Events[0].Seq <= first.Events[0].Seq {
		t.Fatalf("first event %+v: want a resync with a seq above the processed %d", r.Events[0], first.Events[0].Seq)
	}
	last := r.Events[len(r.Events)-1].Seq
	if r, err = m.Renew(ctx, 7, 0, Ack{Epoch: 1, Seq: last}); err != nil || len(r.Events) != 0 {
		t.Fatalf("after acking all: %+v %v", r, err)
	}
}

func TestEndedUnderKeepAliveIsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(7))
		errc := make(chan error, 1)
		go func() {
			_, _, err := m.KeepAlive(context.Background(), 7, 30*time.Second)
			errc <- err
		}()
		waitPolling(t, m, 7)
		m.Ended(7) // the state machine ended it
		synctest.Wait()
		select {
		case err := <-errc:
			if !errors.Is(err, api.ErrSessionExpired) {
				t.Fatalf("got %v, want session_expired", err)
			}
		default:
			t.Fatal("keepalive not released")
		}
	})
}
