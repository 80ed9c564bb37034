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

// returnsWithin reports whether f returns within d, and its error. It runs
// in a synctest bubble: d passes on the bubble's clock, once every other
// goroutine is blocked.
func returnsWithin(d time.Duration, f func() error) (bool, error) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return true, err
	case <-time.After(d):
		return false, nil
	}
}

func caching(ids ...uint64) []fsm.SessionInfo {
	var out []fsm.SessionInfo
	for _, id := range ids {
		out = append(out, fsm.SessionInfo{ID: id, LeaseMS: 12000, Caches: true})
	}
	return out
}

// An invalidation is waited for until the session acknowledges it, ends,
// or leadership is lost; the wait itself never lets a write through early.
func TestWaitAckedEndsOnAckEndOrLoss(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release func(m *Manager, seq uint64)
		wantErr api.Code
	}{
		{"acknowledged", func(m *Manager, seq uint64) {
			if _, err := m.Renew(context.Background(), 7, 0, Ack{Epoch: 1, Seq: seq}); err != nil {
				t.Error(err)
			}
		}, ""},
		{"session ended", func(m *Manager, _ uint64) { m.Ended(7) }, ""},
		{"leadership lost", func(m *Manager, _ uint64) { m.Stop() }, api.CodeNotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, _ := newTestManager(t)
				m.Start(1, caching(7))
				inv, ok := m.Invalidate(7, "/demo/x")
				seq := inv.Seq
				if !ok {
					t.Fatal("no lease for a live session")
				}
				if _, err := m.Renew(context.Background(), 7, 0, Ack{Epoch: 1, Seq: seq - 1}); err != nil {
					t.Fatal(err) // an ack below the invalidation releases nothing
				}
				errc := make(chan error, 1)
				go func() { _, err := m.WaitAcked(context.Background(), 7, inv); errc <- err }()
				synctest.Wait()
				select {
				case err := <-errc:
					t.Fatalf("returned %v before the invalidation was acknowledged", err)
				default:
				}
				tc.release(m, seq)
				synctest.Wait()
				select {
				case err := <-errc:
					if api.CodeOf(err) != tc.wantErr {
						t.Fatalf("WaitAcked: %v, want code %q", err, tc.wantErr)
					}
				default:
					t.Fatal("still waiting")
				}
			})
		})
	}
}

// A cacher that never acknowledges holds the wait only until its lease
// runs out, or the invalidation's deadline before it (a real clock here:
// the wait sleeps until then, on the bubble's clock).
func TestWaitAckedEndsWhenTheLeaseRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Config{Expire: func(context.Context, uint64, uint64) error { return nil }, CheckEvery: time.Hour, TickEvery: time.Hour})
		t.Cleanup(m.Close)
		m.Start(1, []fsm.SessionInfo{{ID: 7, LeaseMS: 200, Caches: true}})
		inv, _ := m.Invalidate(7, "/demo/x")
		inv.Deadline = time.Time{} // none: the lease bounds the wait
		var res WaitResult
		if done, err := returnsWithin(5*time.Second, func() (err error) { res, err = m.WaitAcked(context.Background(), 7, inv); return err }); !done || err != nil || res != LeaseOut {
			t.Fatalf("done=%v err=%v res=%v: the wait must end when the 200 ms lease runs out", done, err, res)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m.Start(2, caching(8))
		inv, _ = m.Invalidate(8, "/demo/x")
		if _, err := m.WaitAcked(ctx, 8, inv); api.CodeOf(err) != api.CodeUnavailable {
			t.Fatalf("a wait whose context ended: %v, want unavailable (the change must not commit)", err)
		}
	})
}

// A new leader's fence holds until every caching session acknowledged its
// epoch; sessions that do not cache, and sessions opened under it, are
// not waited for.
func TestWaitFencedUntilEveryCacherSawTheEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := newTestManager(t)
		infos := append(caching(7, 8), fsm.SessionInfo{ID: 9, LeaseMS: 12000})
		m.Start(3, infos)
		m.Opened(10, 12000)
		m.MarkCaches(10)
		fence := func() (bool, error) {
			return returnsWithin(50*time.Millisecond, func() error { return m.WaitFenced(context.Background()) })
		}
		if done, _ := fence(); done {
			t.Fatal("fenced before any cacher acknowledged the epoch")
		}
		if _, err := m.Renew(context.Background(), 7, 0, Ack{Epoch: 2}); err != nil { // an older epoch: not seen
			t.Fatal(err)
		}
		if _, err := m.Renew(context.Background(), 7, 0, Ack{Epoch: 3}); err != nil {
			t.Fatal(err)
		}
		if done, _ := fence(); done {
			t.Fatal("fenced with session 8 yet to see the epoch")
		}
		m.Ended(8) // gone: nothing left to flush
		if done, err := fence(); !done || err != nil {
			t.Fatalf("done=%v err=%v after every cacher saw the epoch or ended", done, err)
		}
		m.Stop()
		if err := m.WaitFenced(context.Background()); !errors.Is(err, api.ErrNotLeader) {
			t.Fatalf("fence after leadership lost: %v", err)
		}
	})
}

// Clients that never check in hold the fence for the cache window only.
func TestWaitFencedEndsAfterTheCacheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Config{Expire: func(context.Context, uint64, uint64) error { return nil }, CheckEvery: time.Hour, TickEvery: time.Hour})
		t.Cleanup(m.Close)
		// A 400 ms lease: its cache window is 300 ms.
		m.Start(1, []fsm.SessionInfo{{ID: 7, LeaseMS: 400, Caches: true}})
		if done, err := returnsWithin(5*time.Second, func() error { return m.WaitFenced(context.Background()) }); !done || err != nil {
			t.Fatalf("done=%v err=%v: the fence must end with the cache window", done, err)
		}
		m.Start(2, []fsm.SessionInfo{{ID: 8, LeaseMS: 400}})
		if err := m.WaitFenced(context.Background()); err != nil {
			t.Fatalf("no caching session: %v", err)
		}
	})
}
