package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// fakeCell stands in for the Raft group in these unit tests: it records
// proposals and applies the state machine's silence rules (fsm.leaderStart).
type fakeCell struct {
	mu        sync.Mutex
	now       time.Time
	expired   []uint64
	epoch     uint64
	elapsedMS int64
	confirmed map[uint64]uint64 // session → confirmed epoch
	silentMS  map[uint64]int64
	confirms  int
	failConf  bool
}

func (f *fakeCell) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeCell) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fakeCell) expire(_ context.Context, id, _ uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expired = append(f.expired, id)
	return nil
}

func (f *fakeCell) tick(_ context.Context, epoch uint64, elapsed time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if epoch == f.epoch {
		f.elapsedMS = max(f.elapsedMS, elapsed.Milliseconds())
	}
	return nil
}

func (f *fakeCell) confirm(_ context.Context, epoch uint64, ids []uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failConf {
		return errors.New("no quorum")
	}
	f.confirms++
	if epoch == f.epoch {
		for _, id := range ids {
			f.confirmed[id], f.silentMS[id] = epoch, 0
		}
	}
	return nil
}

// leaderStart applies a leader_start: charge unconfirmed sessions.
func (f *fakeCell) leaderStart(ids ...uint64) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if f.confirmed[id] < f.epoch {
			f.silentMS[id] += f.elapsedMS
		}
	}
	f.epoch++
	f.elapsedMS = 0
	return f.epoch
}

func (f *fakeCell) sessions(ids ...uint64) []fsm.SessionInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fsm.SessionInfo
	for _, id := range ids {
		out = append(out, fsm.SessionInfo{ID: id, LeaseMS: 12000, SilentMS: f.silentMS[id], ConfirmedEpoch: f.confirmed[id]})
	}
	return out
}

func newTestManager(t *testing.T) (*Manager, *fakeCell) {
	t.Helper()
	f := &fakeCell{now: time.Unix(1_000_000, 0), confirmed: map[uint64]uint64{}, silentMS: map[uint64]int64{}}
	m := New(Config{Expire: f.expire, Tick: f.tick, Confirm: f.confirm, Now: f.Now, CheckEvery: time.Hour, TickEvery: time.Hour, ConfirmDelay: time.Millisecond})
	t.Cleanup(m.Close)
	return m, f
}

// expireDue runs one expiry pass synchronously.
func expireDue(m *Manager) []uint64 {
	var ids []uint64
	for _, d := range m.dueForExpiry(1000) {
		m.expire(d.session, d.epoch)
		ids = append(ids, d.session)
	}
	return ids
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLeaseLifecycle(t *testing.T) {
	m, f := newTestManager(t)
	ctx := context.Background()
	if _, _, err := m.KeepAlive(ctx, 1, 0); !errors.Is(err, api.ErrNotLeader) {
		t.Fatalf("inactive keepalive: %v, want not_leader", err)
	}
	m.Start(1, f.sessions(1, 2))
	f.advance(8 * time.Second)
	if _, _, err := m.KeepAlive(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	f.advance(5 * time.Second) // session 2 silent 13 s, session 1 silent 5 s
	if got := expireDue(m); len(got) != 1 || got[0] != 2 {
		t.Fatalf("expired %v, want [2]", got)
	}
	if _, _, err := m.KeepAlive(ctx, 2, 0); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("keepalive of expiring session: %v, want unavailable until the expiry applies", err)
	}
	m.Ended(2)
	if _, _, err := m.KeepAlive(ctx, 2, 0); !errors.Is(err, ErrUnknown) {
		t.Fatalf("keepalive of ended session: %v", err)
	}
	m.Stop()
	if _, _, err := m.KeepAlive(ctx, 1, 0); !errors.Is(err, api.ErrNotLeader) {
		t.Fatalf("after stop: %v", err)
	}
	if got := expireDue(m); len(got) != 0 {
		t.Fatalf("stopped manager expired %v", got)
	}
}

func TestFailoverGivesFullLease(t *testing.T) {
	m, f := newTestManager(t)
	m.Start(1, f.sessions(1))
	f.advance(11 * time.Second)
	m.Stop()
	m.Start(2, f.sessions(1)) // new leader, no checkpoint was taken (failCP below is not set but no pass ran)
	f.advance(11 * time.Second)
	if got := expireDue(m); len(got) != 0 {
		t.Fatalf("expired %v within a fresh lease", got)
	}
	f.advance(2 * time.Second)
	if got := expireDue(m); len(got) != 1 {
		t.Fatalf("expired %v, want session 1 after a full lease", got)
	}
}

func TestLongPollWakesOnEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(7))
		done := make(chan []api.Event, 1)
		go func() {
			evs, _, err := m.KeepAlive(context.Background(), 7, 30*time.Second)
			if err != nil {
				t.Error(err)
			}
			done <- evs
		}()
		waitPolling(t, m, 7)
		m.Deliver(7, api.Event{Type: api.EventDeleted, Path: "/demo/x", Index: 9})
		synctest.Wait()
		select {
		case evs := <-done:
			if len(evs) == 0 || evs[0].Path != "/demo/x" {
				t.Fatalf("events %v", evs)
			}
		default:
			t.Fatal("long-poll did not wake")
		}
	})
}

func TestEventOverflowBecomesResync(t *testing.T) {
	m, f := newTestManager(t)
	m.Start(1, f.sessions(7))
	for i := 0; i < api.MaxPendingEvents+10; i++ {
		m.Deliver(7, api.Event{Type: api.EventDataChanged, Path: "/demo/x", Index: uint64(i)})
	}
	evs, _, err := m.KeepAlive(context.Background(), 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) > 11 || evs[0].Type != api.EventResync {
		t.Fatalf("got %d events, first %v; want a resync first", len(evs), evs[0])
	}
}

func TestStopReleasesWaitingKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(7))
		errc := make(chan error, 1)
		go func() {
			_, _, err := m.KeepAlive(context.Background(), 7, 30*time.Second)
			errc <- err
		}()
		waitPolling(t, m, 7)
		m.Stop()
		synctest.Wait()
		select {
		case err := <-errc:
			if !errors.Is(err, api.ErrNotLeader) {
				t.Fatalf("got %v, want not_leader", err)
			}
		default:
			t.Fatal("stop did not release the keepalive")
		}
	})
}

func TestFirstKeepAlivePerLeaderIsConfirmedOnce(t *testing.T) {
	m, f := newTestManager(t)
	m.Start(f.leaderStart(1), f.sessions(1))
	for i := 0; i < 10; i++ {
		f.advance(4 * time.Second)
		if _, _, err := m.KeepAlive(context.Background(), 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if f.confirms != 1 {
		t.Fatalf("%d confirms for one leadership, want 1", f.confirms)
	}
	f.failConf = true
	m.Stop()
	m.Start(f.leaderStart(1), f.sessions(1))
	if _, _, err := m.KeepAlive(context.Background(), 1, 0); err == nil {
		t.Fatal("first keepalive under a new leader acknowledged without a committed confirm")
	}
}

// flap runs leaderships of life each, separated by gap, for session ids;
// renew says whether (and when in each leadership) the client renews.
func flap(t *testing.T, m *Manager, f *fakeCell, n int, life, gap time.Duration, renewAt time.Duration, ids ...uint64) (expiredAt int) {
	t.Helper()
	for epoch := 1; epoch <= n; epoch++ {
		m.Start(f.leaderStart(ids...), f.sessions(ids...))
		for step := time.Duration(0); step < life; step += 250 * time.Millisecond {
			f.advance(250 * time.Millisecond)
			if renewAt > 0 && step+250*time.Millisecond == renewAt {
				for _, id := range ids {
					if _, _, err := m.KeepAlive(context.Background(), id, 0); err != nil {
						t.Fatalf("renewal under leader %d: %v", epoch, err)
					}
				}
			}
			if (step+250*time.Millisecond)%time.Second == 0 {
				m.tick()
			}
			if got := expireDue(m); len(got) > 0 {
				return epoch
			}
		}
		m.Stop()
		f.advance(gap)
	}
	return 0
}

// TestRepeatedFailoversBoundDeadSession: leaders that each live 2 s must not
// keep a dead session alive forever (etcd #9888): each leadership's committed
// ticks are charged to sessions that never renewed under it.
func TestRepeatedFailoversBoundDeadSession(t *testing.T) {
	m, f := newTestManager(t)
	const life, gap = 2 * time.Second, time.Second
	at := flap(t, m, f, 100, life, gap, 0, 1)
	if at == 0 {
		t.Fatal("dead session survived 100 fail-overs")
	}
	t.Logf("dead session expired under leader %d, %v after it went silent", at, time.Duration(at-1)*(life+gap)+life)
}

// TestRepeatedFailoversKeepLiveSession: a client that renews once under each
// short-lived leader is never expired.
func TestRepeatedFailoversKeepLiveSession(t *testing.T) {
	m, f := newTestManager(t)
	if at := flap(t, m, f, 60, 2*time.Second, time.Second, 500*time.Millisecond, 1); at != 0 {
		t.Fatalf("live session expired under leader %d", at)
	}
}
