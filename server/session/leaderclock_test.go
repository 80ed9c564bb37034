package session

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// A second Start under the epoch the manager already runs (a retried
// leader_start that committed twice) keeps every lease: the lease clock is
// not reset and a waiting KeepAlive is not released as expired.
func TestStartTwiceKeepsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, f := newTestManager(t)
		m.Start(1, f.sessions(1, 2))
		type reply struct {
			evs []api.Event
			err error
		}
		replies := make(chan reply, 1)
		go func() {
			evs, _, err := m.KeepAlive(context.Background(), 2, time.Minute)
			replies <- reply{evs, err}
		}()
		waitPolling(t, m, 2) // the KeepAlive of session 2 is parked

		f.advance(11 * time.Second)
		m.Start(1, f.sessions(1, 2)) // same epoch: the running leadership
		synctest.Wait()
		select {
		case r := <-replies:
			t.Fatalf("second Start released the waiting keepalive: %v, %v", r.evs, r.err)
		default:
		}
		m.Deliver(2, api.Event{Type: api.EventDeleted, Path: "/demo/x", Index: 9})
		synctest.Wait()
		select {
		case r := <-replies:
			if r.err != nil || len(r.evs) != 1 {
				t.Fatalf("keepalive after second Start: %v, %v", r.evs, r.err)
			}
		default:
			t.Fatal("keepalive not woken by its event")
		}
		if _, _, err := m.KeepAlive(context.Background(), 2, 0); err != nil {
			t.Fatal(err)
		}

		// Session 1 was silent 13 s since the first Start: the second Start must
		// not have given it a fresh lease.
		f.advance(2 * time.Second)
		if got := expireDue(m); len(got) != 1 || got[0] != 1 {
			t.Fatalf("expired %v, want [1]: the second Start renewed a silent lease", got)
		}
		if _, _, err := m.KeepAlive(context.Background(), 2, 0); err != nil {
			t.Fatalf("session 2 renewed 2 s ago: %v", err)
		}
	})
}

// lcSim drives the real state machine, and one real Manager and LeaderClock
// per replica, through fail-overs on a fake clock. Every replica applies
// each entry at the moment it commits; the leader's manager reacts to the
// applies as the cell adapter does.
type lcSim struct {
	t        *testing.T
	now      time.Time
	nowMu    sync.Mutex
	mu       sync.Mutex // state, idx
	state    *fsm.State
	idx      uint64
	replicas []*lcReplica
	leader   *lcReplica
	term     uint64
}

type lcReplica struct {
	id    uint64
	m     *Manager
	clock *LeaderClock
}

func newLCSim(t *testing.T, replicas int) *lcSim {
	s := &lcSim{t: t, now: time.Unix(1_000_000, 0), state: fsm.New()}
	for i := 1; i <= replicas; i++ {
		r := &lcReplica{id: uint64(i), clock: NewLeaderClock(s.Now)}
		r.m = New(Config{
			Expire: func(_ context.Context, id, epoch uint64) error {
				_, err := s.apply(fsm.Command{Op: fsm.OpExpireSession, Target: id, Epoch: epoch})
				if err == nil {
					r.m.Ended(id)
				}
				return err
			},
			Tick: func(_ context.Context, epoch uint64, elapsed time.Duration) error {
				_, err := s.apply(fsm.Command{Op: fsm.OpLeaderTick, Epoch: epoch, ElapsedMS: elapsed.Milliseconds()})
				return err
			},
			Confirm: func(_ context.Context, epoch uint64, ids []uint64) error {
				_, err := s.apply(fsm.Command{Op: fsm.OpConfirm, Epoch: epoch, Sessions: ids})
				return err
			},
			Now: s.Now, CheckEvery: time.Hour, TickEvery: time.Hour, ConfirmDelay: time.Millisecond,
		})
		t.Cleanup(r.m.Close)
		s.replicas = append(s.replicas, r)
	}
	return s
}

func (s *lcSim) Now() time.Time { s.nowMu.Lock(); defer s.nowMu.Unlock(); return s.now }
func (s *lcSim) advance(d time.Duration) {
	s.nowMu.Lock()
	s.now = s.now.Add(d)
	s.nowMu.Unlock()
}

// apply commits one entry: every replica applies it now.
func (s *lcSim) apply(c fsm.Command) (fsm.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idx++
	a := s.state.ApplyEntry(s.idx, c.Encode())
	if a.Result.Err != nil {
		return a.Result, a.Result.Err
	}
	if c.Op == fsm.OpLeaderStart {
		for _, r := range s.replicas {
			r.clock.Applied(s.state.Epoch())
		}
	}
	return a.Result, nil
}

// elect makes replica r leader under a new term: it proposes leader_start
// as announce does, and its manager starts when the entry applies.
func (s *lcSim) elect(r *lcReplica) {
	s.t.Helper()
	s.term++
	epoch, prev := r.clock.Prev()
	if _, err := s.apply(fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: r.id, Term: s.term, Epoch: epoch, PrevLeadershipMS: prev}); err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	epoch, sessions := s.state.Epoch(), s.state.Sessions()
	s.mu.Unlock()
	r.m.Start(epoch, sessions)
	s.leader = r
}

func (s *lcSim) depose() {
	s.leader.m.Stop()
	s.leader = nil
}

func (s *lcSim) alive(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.SessionExists(id) == nil
}

// expirePass runs the leader's expiry check once, synchronously.
func (s *lcSim) expirePass() {
	m := s.leader.m
	for _, d := range m.dueForExpiry(1000) {
		m.expire(d.session, d.epoch)
	}
}

// Leaderships of any length, separated by elections or by near-instant
// leader transfers, cannot keep a dead session alive for more than about a
// lease; and they never cut short a session whose client renews at least
// once under every leader, or every lease/3 of real time.
func TestFailoversOfAnyLengthBoundDeadSession(t *testing.T) {
	const (
		lease    = 12 * time.Second
		step     = 50 * time.Millisecond
		maxFlaps = 200
	)
	cases := []struct {
		name      string
		life, gap time.Duration
	}{
		{"0.5s-leaders/1s-elections", 500 * time.Millisecond, time.Second},
		{"0.75s-leaders/1s-elections", 750 * time.Millisecond, time.Second},
		{"1.5s-leaders/1s-elections", 1500 * time.Millisecond, time.Second},
		{"2s-leaders/1s-elections", 2 * time.Second, time.Second},
		{"0.5s-leaders/transfers", 500 * time.Millisecond, 0},
		{"0.75s-leaders/transfers", 750 * time.Millisecond, 0},
		{"2s-leaders/transfers", 2 * time.Second, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newLCSim(t, 3)
			s.elect(s.replicas[0])
			open := func() uint64 {
				r, err := s.apply(fsm.Command{Op: fsm.OpOpenSession, LeaseMS: lease.Milliseconds()})
				if err != nil {
					t.Fatal(err)
				}
				s.leader.m.Opened(r.Session, r.LeaseMS)
				return r.Session
			}
			dead, perLeader, perThird := open(), open(), open()
			opened := s.Now()
			lastAck := map[uint64]time.Time{perLeader: opened, perThird: opened}
			renew := func(id uint64) {
				sent := s.Now()
				if _, _, err := s.leader.m.KeepAlive(context.Background(), id, 0); err != nil {
					t.Fatalf("live session %d: keepalive at %v: %v", id, sent.Sub(opened), err)
				}
				lastAck[id] = sent
			}
			// The granted lease must never end before the one the client
			// believes in: lastAck + lease.
			checkGrants := func() {
				m := s.leader.m
				m.mu.Lock()
				defer m.mu.Unlock()
				for id, acked := range lastAck {
					if l, ok := m.leases[id]; !ok || l.expiry.Before(acked.Add(lease)) {
						t.Fatalf("at %v: session %d acknowledged at %v granted a lease to %v, before its client's %v",
							s.Now().Sub(opened), id, acked.Sub(opened), l.expiry.Sub(opened), acked.Add(lease).Sub(opened))
					}
				}
			}

			var deadGone time.Duration
			for flap := 1; flap <= maxFlaps; flap++ {
				if flap > 1 {
					s.elect(s.replicas[(flap-1)%len(s.replicas)])
				}
				checkGrants()
				start := s.Now()
				for el := step; el <= tc.life; el += step {
					s.advance(step)
					// perLeader renews once per leadership, alternately at
					// its start and at its end (the widest spacing).
					if (flap%2 == 1 && el == step) || (flap%2 == 0 && el+step > tc.life) {
						renew(perLeader)
					}
					if s.Now().Sub(lastAck[perThird]) >= lease/3 {
						renew(perThird)
					}
					if s.Now().Sub(start)%time.Second < step {
						s.leader.m.tick()
					}
					s.expirePass()
					if deadGone == 0 && !s.alive(dead) {
						deadGone = s.Now().Sub(opened)
					}
				}
				s.depose()
				s.advance(tc.gap)
				for _, id := range []uint64{perLeader, perThird} {
					if !s.alive(id) {
						t.Fatalf("live session %d expired under leader %d (%v after open)", id, flap, s.Now().Sub(opened))
					}
				}
				if deadGone != 0 && s.Now().Sub(opened) > 3*lease {
					break
				}
			}
			if deadGone == 0 {
				t.Fatalf("dead session survived %v of %v leaderships and %v elections", s.Now().Sub(opened), tc.life, tc.gap)
			}
			// Bound: a lease (plus the drift margin), the leadership it was
			// opened under with the gap after it (uncharged: it was confirmed
			// there), and one more gap in which no leader can expire it.
			bound := lease + lease/50 + tc.life + 2*tc.gap + step
			if deadGone > bound {
				t.Fatalf("dead session expired %v after its last acknowledgement, want at most %v", deadGone, bound)
			}
			t.Logf("dead session gone %v after it went silent (bound %v)", deadGone, bound)
		})
	}
}
