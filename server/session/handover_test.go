package session

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// TestHandOverHoldsRenewals: a hand-over measures each session's silence
// (the most silent first) and from that moment renews nothing, neither a
// KeepAlive nor a proxy's batch: they wait until the hand-over is thawed
// (then go on), the leadership ends (not_leader) or MaxHandOverHold
// passes (unavailable). A second hand-over is refused meanwhile.
func TestHandOverHoldsRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(1, 2, 3))
		ctx := context.Background()
		f.advance(4 * time.Second)
		if _, _, err := m.KeepAlive(ctx, 1, 0); err != nil {
			t.Fatal(err)
		}
		f.advance(2 * time.Second)

		epoch, silences, err := m.HandOver()
		if err != nil || epoch != 1 {
			t.Fatalf("hand-over: epoch %d, %v", epoch, err)
		}
		want := []Silence{{2, 6000}, {3, 6000}, {1, 2000}}
		if len(silences) != len(want) {
			t.Fatalf("silences %v, want %v", silences, want)
		}
		for i := range want {
			if silences[i] != want[i] {
				t.Fatalf("silences %v, want %v", silences, want)
			}
		}
		if _, _, err := m.HandOver(); !errors.Is(err, api.ErrUnavailable) {
			t.Fatalf("second hand-over: %v, want unavailable", err)
		}

		// Held while frozen; thawed, they renew.
		single, batch := renewInBackground(m, 1), batchInBackground(m, 2)
		synctest.Wait()
		for _, ch := range []chan error{single, batch} {
			select {
			case err := <-ch:
				t.Fatalf("renewed during a hand-over (%v): the next leader would cut its lease short", err)
			default:
			}
		}
		m.Thaw(1)
		for _, ch := range []chan error{single, batch} {
			if err := <-ch; err != nil {
				t.Fatalf("renewal after the thaw: %v", err)
			}
		}

		// Held past MaxHandOverHold: unavailable, the lease untouched.
		if _, _, err := m.HandOver(); err != nil {
			t.Fatal(err)
		}
		single = renewInBackground(m, 3)
		time.Sleep(MaxHandOverHold + time.Millisecond)
		if err := <-single; !errors.Is(err, api.ErrUnavailable) {
			t.Fatalf("renewal held past the bound: %v, want unavailable", err)
		}

		// The leadership ends: held renewals answer not_leader.
		single = renewInBackground(m, 3)
		synctest.Wait()
		m.Stop()
		if err := <-single; !errors.Is(err, api.ErrNotLeader) {
			t.Fatalf("renewal when the leadership ended: %v, want not_leader", err)
		}
	})
}

// TestHandOverLists bounds the list at fsm.MaxHandOverSessions, the most
// silent first, and counts an expiring lease whole.
func TestHandOverLists(t *testing.T) {
	m, f := newTestManager(t)
	ids := make([]uint64, fsm.MaxHandOverSessions+10)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	m.Start(1, f.sessions(ids...))
	m.mu.Lock()
	for _, id := range ids { // session id silent id ms
		l := m.leases[id]
		l.expiry = f.Now().Add(l.dur - time.Duration(id)*time.Millisecond)
	}
	m.leases[1].expiring = true
	m.mu.Unlock()
	_, silences, err := m.HandOver()
	if err != nil {
		t.Fatal(err)
	}
	if len(silences) != fsm.MaxHandOverSessions {
		t.Fatalf("%d silences, want %d", len(silences), fsm.MaxHandOverSessions)
	}
	if silences[0].SilentMS != 12000 {
		t.Fatalf("first silence %v: the expiring lease counts whole", silences[0])
	}
	for i := 1; i < len(silences); i++ {
		if silences[i].SilentMS > silences[i-1].SilentMS {
			t.Fatalf("silences not most silent first at %d: %v, %v", i, silences[i-1], silences[i])
		}
	}
	m.Thaw(1)
}

// renewInBackground sends a KeepAlive for id that waits for nothing.
func renewInBackground(m *Manager, id uint64) chan error {
	ch := make(chan error, 1)
	go func() {
		_, _, err := m.KeepAlive(context.Background(), id, 0)
		ch <- err
	}()
	return ch
}

// batchInBackground renews id in a proxy's batch that waits for nothing.
func batchInBackground(m *Manager, id uint64) chan error {
	ch := make(chan error, 1)
	go func() {
		r, err := m.RenewBatch(context.Background(), "p1", 1, []BatchEntry{{Session: id}}, 0)
		if err == nil && len(r.Renewed) != 1 {
			err = errors.New("batch renewed nothing")
		}
		ch <- err
	}()
	return ch
}

// TestHandOverExpiresNothing: while a hand-over holds renewals nothing
// is expired here (a renewal held may yet go on if it is cancelled; if
// not, the record decides); thawed, a run-out lease expires.
func TestHandOverExpiresNothing(t *testing.T) {
	m, f := newTestManager(t)
	m.Start(1, f.sessions(1))
	if _, _, err := m.HandOver(); err != nil {
		t.Fatal(err)
	}
	f.advance(13 * time.Second)
	if got := expireDue(m); len(got) != 0 {
		t.Fatalf("expired %v during a hand-over", got)
	}
	m.Thaw(1)
	if got := expireDue(m); len(got) != 1 || got[0] != 1 {
		t.Fatalf("expired %v after the thaw, want [1]", got)
	}
}
