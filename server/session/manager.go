// Package session is the leader's session manager: lease timers in memory,
// extended by KeepAlive without touching the log, and one committed expiry
// entry when a lease runs out. It is soft state beside the state machine: it
// runs only while its replica leads (from the moment that replica's
// leader_start entry applies) and stops the moment leadership is lost.
package session

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// Expirer commits the expiry of a session decided under a leader epoch.
type Expirer func(ctx context.Context, session, epoch uint64) error

// Config configures a Manager.
type Config struct {
	Expire Expirer
	// Tick is how often leases are checked; expiry is late by at most Tick.
	Tick time.Duration
	// MaxConcurrentExpiries bounds expiry proposals in flight.
	MaxConcurrentExpiries int
	Now                   func() time.Time
	Logger                *slog.Logger
}

type lease struct {
	dur      time.Duration
	expiry   time.Time
	expiring bool // an expiry proposal is in flight
	events   []api.Event
	wake     chan struct{} // closed to release the waiting KeepAlive
}

// Manager tracks the leases of every session while its replica leads.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	active  bool
	epoch   uint64
	leases  map[uint64]*lease
	stopped chan struct{} // closed when leadership ends

	done chan struct{}
	wg   sync.WaitGroup

	keepAlives atomic.Uint64
	expiries   atomic.Uint64
	dropped    atomic.Uint64
}

// ErrUnknown means the manager has no lease for the session: the caller must
// ask the state machine whether it ended or never existed.
var ErrUnknown = api.Errorf(api.CodeNoSession, "no lease for session")

// New starts a manager (inactive until Start).
func New(cfg Config) *Manager {
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.MaxConcurrentExpiries <= 0 {
		cfg.MaxConcurrentExpiries = 32
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, leases: map[uint64]*lease{}, stopped: make(chan struct{}), done: make(chan struct{})}
	close(m.stopped)
	m.wg.Add(1)
	go m.loop()
	return m
}

// Close stops the manager's goroutines.
func (m *Manager) Close() {
	m.Stop()
	close(m.done)
	m.wg.Wait()
}

// Start activates the manager under a new leader epoch and gives every
// session a full lease from now: a fail-over never expires anyone.
func (m *Manager) Start(epoch uint64, sessions []fsm.SessionInfo) {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deactivateLocked()
	m.active, m.epoch = true, epoch
	m.stopped = make(chan struct{})
	for _, s := range sessions {
		d := time.Duration(s.LeaseMS) * time.Millisecond
		m.leases[s.ID] = &lease{dur: d, expiry: now.Add(d)}
	}
	m.cfg.Logger.Info("session manager started", "epoch", epoch, "sessions", len(sessions))
}

// Stop deactivates the manager: leadership is lost. Waiting KeepAlives return
// not_leader and nothing more is expired.
func (m *Manager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active {
		m.cfg.Logger.Info("session manager stopped", "epoch", m.epoch)
	}
	m.deactivateLocked()
}

func (m *Manager) deactivateLocked() {
	if !m.active {
		return
	}
	m.active = false
	close(m.stopped)
	m.leases = map[uint64]*lease{}
}

// Active reports whether the manager runs, and under which epoch.
func (m *Manager) Active() (bool, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active, m.epoch
}

// Opened gives a newly opened session its first lease.
func (m *Manager) Opened(id uint64, leaseMS int64) {
	d := time.Duration(leaseMS) * time.Millisecond
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active {
		m.leases[id] = &lease{dur: d, expiry: now.Add(d)}
	}
}

// Ended forgets a session that closed or expired; its waiting KeepAlive
// returns session_expired.
func (m *Manager) Ended(id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[id]; ok {
		delete(m.leases, id)
		if l.wake != nil {
			close(l.wake)
			l.wake = nil
		}
	}
}

// Deliver queues an event for the session and releases its KeepAlive.
func (m *Manager) Deliver(id uint64, ev api.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	if !ok || !m.active {
		return
	}
	if len(l.events) >= api.MaxPendingEvents {
		// Too far behind: tell the client to re-read everything instead.
		m.dropped.Add(uint64(len(l.events)))
		l.events = append(l.events[:0], api.Event{Type: api.EventResync, Index: ev.Index})
	} else {
		l.events = append(l.events, ev)
	}
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// KeepAlive extends the session's lease from now and waits up to wait for
// events. It returns the events and the lease length.
func (m *Manager) KeepAlive(ctx context.Context, id uint64, wait time.Duration) ([]api.Event, time.Duration, error) {
	m.keepAlives.Add(1)
	m.mu.Lock()
	if !m.active {
		m.mu.Unlock()
		return nil, 0, api.Errorf(api.CodeNotLeader, "not the leader")
	}
	l, ok := m.leases[id]
	if !ok {
		m.mu.Unlock()
		return nil, 0, ErrUnknown
	}
	if l.expiring {
		m.mu.Unlock()
		return nil, 0, api.Errorf(api.CodeSessionExpired, "session %d lease ran out", id)
	}
	l.expiry = m.cfg.Now().Add(l.dur)
	if len(l.events) > 0 || wait <= 0 {
		evs := l.events
		l.events = nil
		m.mu.Unlock()
		return evs, l.dur, nil
	}
	if l.wake != nil {
		close(l.wake) // one waiter per session: the older one returns now
	}
	wake := make(chan struct{})
	l.wake = wake
	stopped := m.stopped
	m.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-wake:
	case <-timer.C:
	case <-ctx.Done():
	case <-stopped:
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.leases[id]; !ok || cur != l {
		if !m.active {
			return nil, 0, api.Errorf(api.CodeNotLeader, "leadership lost")
		}
		return nil, 0, api.Errorf(api.CodeSessionExpired, "session %d ended", id)
	}
	if l.wake == wake {
		l.wake = nil
	}
	evs := l.events
	l.events = nil
	return evs, l.dur, nil
}

// Stats returns live leases and counters.
func (m *Manager) Stats() (leases int, keepAlives, expiries, droppedEvents uint64) {
	m.mu.Lock()
	leases = len(m.leases)
	m.mu.Unlock()
	return leases, m.keepAlives.Load(), m.expiries.Load(), m.dropped.Load()
}

func (m *Manager) loop() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Tick)
	defer t.Stop()
	sem := make(chan struct{}, m.cfg.MaxConcurrentExpiries)
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		for _, id := range m.dueForExpiry(cap(sem) - len(sem)) {
			sem <- struct{}{}
			m.wg.Add(1)
			go func(id, epoch uint64) {
				defer m.wg.Done()
				defer func() { <-sem }()
				m.expire(id, epoch)
			}(id.session, id.epoch)
		}
	}
}

type due struct{ session, epoch uint64 }

// dueForExpiry marks up to limit run-out leases as expiring.
func (m *Manager) dueForExpiry(limit int) []due {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.active {
		return nil
	}
	var out []due
	for id, l := range m.leases {
		if len(out) >= limit {
			break
		}
		if !l.expiring && now.After(l.expiry) {
			l.expiring = true
			out = append(out, due{id, m.epoch})
		}
	}
	return out
}

func (m *Manager) expire(id, epoch uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.cfg.Expire(ctx, id, epoch)
	if err == nil {
		m.expiries.Add(1)
		m.cfg.Logger.Info("session expired", "session", id, "epoch", epoch)
		return
	}
	m.cfg.Logger.Warn("session expiry not committed", "session", id, "epoch", epoch, "err", err)
	m.mu.Lock()
	defer m.mu.Unlock()
	// Retry on the next tick if we still lead under the same epoch.
	if l, ok := m.leases[id]; ok && m.active && m.epoch == epoch {
		l.expiring = false
	}
}

// Requeue puts undelivered events back at the front of a session's queue
// (the reply carrying them could not be sent).
func (m *Manager) Requeue(id uint64, evs []api.Event) {
	if len(evs) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[id]; ok && m.active && len(l.events)+len(evs) <= api.MaxPendingEvents {
		l.events = append(append([]api.Event(nil), evs...), l.events...)
	}
}
