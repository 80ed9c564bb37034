// Package session is the leader's session manager: lease timers in memory,
// extended by KeepAlive without touching the log, and one committed expiry
// entry when a lease runs out. It is soft state beside the state machine: it
// runs only while its replica leads (from the moment that replica's
// leader_start entry applies) and stops the moment leadership is lost.
package session

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/internal/recent"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// Expirer commits the expiry of a session decided under a leader epoch.
type Expirer func(ctx context.Context, session, epoch uint64) error

// Ticker commits how long this leader has led under epoch.
type Ticker func(ctx context.Context, epoch uint64, elapsed time.Duration) error

// Confirmer commits that sessions renewed under epoch.
type Confirmer func(ctx context.Context, epoch uint64, sessions []uint64) error

// Config configures a Manager.
type Config struct {
	Expire  Expirer
	Tick    Ticker
	Confirm Confirmer
	// TickEvery is how often the leader records how long it has led.
	TickEvery time.Duration
	// ConfirmDelay gathers first KeepAlives after a fail-over into one entry.
	ConfirmDelay time.Duration
	// CheckEvery is how often leases are checked; expiry is late by at most this.
	CheckEvery time.Duration
	// MaxConcurrentExpiries bounds expiry proposals in flight.
	MaxConcurrentExpiries int
	// CacheWindow is how long after its last confirmed KeepAlive a client
	// may serve reads from its cache (api.CacheWindow by default): a new
	// leader holds writes to cacheable nodes until every client has seen
	// its epoch or this long has passed since it started.
	CacheWindow time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

// MaxSessionsPerConfirm bounds one confirm entry.
const MaxSessionsPerConfirm = 4096

type lease struct {
	dur    time.Duration
	expiry time.Time
	// confirmed: the state knows the session renewed under this leader.
	confirmed bool
	expiring  bool // an expiry proposal is in flight
	ended     bool // the state machine ended the session (Ended)
	// events are the session's events not yet acknowledged, in seq order.
	// Replies carry copies; only an ack removes them, so a reply lost on
	// the way (or written to a connection its client gave up on) loses
	// nothing: the next KeepAlive carries them again.
	events []api.Event
	wake   *waiter // the waiting KeepAlive (park.go): released to answer it
	// acked is the highest event seq the client acknowledged under this
	// leadership; ackWake is closed (and replaced) when it rises.
	acked   uint64
	ackWake chan struct{}
	// renewedAt is when the leader last renewed the lease (a KeepAlive or
	// a batch processed, the open, or this leadership's start): the
	// client's cache window counts from a send before it. invals are the
	// invalidations not yet acknowledged, in seq order, with their
	// deadlines; flushSeq, once set, is the last invalidation sent when
	// the session was refused as a cacher (cache.go).
	renewedAt time.Time
	invals    []pendingInval
	flushSeq  uint64
	// caches: the client caches reads. sawEpoch: it acknowledged this
	// leadership's epoch, so it has flushed what it cached under an
	// earlier one (cache.go); true from the start if it does not cache.
	caches   bool
	sawEpoch bool
	// fenceBy is when this leadership's fence stops waiting for it (its
	// start plus the session's cache window; fence.go).
	fenceBy time.Time
	// sub is the proxy that renewed the session last (batch.go): an event
	// for it is noted there and ends that proxy's waiting batch.
	sub *subscriber
}

// Manager tracks the leases of every session while its replica leads.
type Manager struct {
	cfg Config

	mu     sync.Mutex
	active bool
	epoch  uint64
	since  time.Time // when this leadership's manager started
	leases map[uint64]*lease
	// subs are the proxies renewing sessions here, by name (batch.go).
	subs    map[string]*subscriber
	stopped chan struct{} // closed when leadership ends
	// unfenced counts the caching leases whose clients have not
	// acknowledged this leadership's epoch; fenced is set once none is
	// left or the cache window since the start has passed; fence holds
	// which nodes each may still serve from an earlier leader's grant
	// (fence.go).
	unfenced int
	fenced   bool
	fenceBy  time.Time // the start plus the longest cache window of its sessions
	fence    fence
	// frozen: a planned hand-over holds every renewal (handover.go);
	// thawed is closed when it ends.
	frozen bool
	thawed chan struct{}
	// seq numbers events. It only grows for the manager's life, so seqs
	// grow per session within a leadership (clients reset their ack when
	// the epoch changes) and an ack never covers an event of a newer lease.
	seq uint64

	done chan struct{}
	wg   sync.WaitGroup

	// confirm batching: first KeepAlives under a leader wait for one entry.
	confirmMu   sync.Mutex
	confirmIDs  []uint64
	confirmDone chan struct{} // closed when the pending batch is decided
	confirmErr  *error
	confirmKick chan struct{}

	keepAlives    atomic.Uint64
	batches       atomic.Uint64
	batchSessions atomic.Uint64
	expiries      atomic.Uint64
	// recentExpiries counts the expiries per second, for ExpiriesIn.
	recentExpiries recent.Counter
	dropped        atomic.Uint64
	missed         atomic.Uint64
}

// ErrUnknown means the manager has no lease for the session: the caller must
// ask the state machine whether it ended or never existed.
var ErrUnknown = api.Errorf(api.CodeNoSession, "no lease for session")

// New starts a manager (inactive until Start).
func New(cfg Config) *Manager {
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = 100 * time.Millisecond
	}
	if cfg.TickEvery <= 0 {
		cfg.TickEvery = time.Second
	}
	if cfg.ConfirmDelay <= 0 {
		cfg.ConfirmDelay = 5 * time.Millisecond
	}
	if cfg.MaxConcurrentExpiries <= 0 {
		cfg.MaxConcurrentExpiries = 32
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CacheWindow <= 0 {
		cfg.CacheWindow = api.CacheWindow
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, leases: map[uint64]*lease{}, subs: map[string]*subscriber{}, stopped: make(chan struct{}), done: make(chan struct{}), confirmKick: make(chan struct{}, 1)}
	close(m.stopped)
	m.wg.Add(2)
	go m.loop()
	go m.confirmLoop()
	return m
}

// Close stops the manager's goroutines.
func (m *Manager) Close() {
	m.Stop()
	close(m.done)
	m.wg.Wait()
}

// Start activates the manager under a new leader epoch and gives every
// session a full lease from now, less the silence the state has recorded for
// it: a fail-over never expires a live session, and repeated fail-overs
// cannot keep a dead one alive forever. This is safe because the recorded
// silence is a lower bound on the time since the session's last
// acknowledged KeepAlive.
//
// Start under the epoch the manager already runs changes nothing: the
// running leadership's leases (and its waiting KeepAlives) are kept.
func (m *Manager) Start(epoch uint64, sessions []fsm.SessionInfo) {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active && m.epoch == epoch {
		return
	}
	m.deactivateLocked()
	m.active, m.epoch, m.since = true, epoch, now
	m.stopped = make(chan struct{})
	for _, s := range sessions {
		d := time.Duration(s.LeaseMS) * time.Millisecond
		silent := time.Duration(s.SilentMS) * time.Millisecond
		// A session that does not cache has nothing to flush.
		m.leases[s.ID] = &lease{dur: d, expiry: now.Add(d - silent), renewedAt: now, confirmed: s.ConfirmedEpoch == epoch, caches: s.Caches, sawEpoch: !s.Caches}
	}
	m.startFenceLocked(now, sessions)
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
	m.active, m.unfenced, m.fenced = false, 0, false
	m.thawLocked()
	close(m.stopped)
	for _, l := range m.leases {
		// A parked KeepAlive holds no goroutine to see stopped.
		l.releaseWaiter()
	}
	m.leases = map[uint64]*lease{}
	m.subs = map[string]*subscriber{} // their waiting batches end on stopped
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
		// Its client learns this leadership's epoch from the open's reply
		// and has cached nothing before it.
		m.leases[id] = &lease{dur: d, expiry: now.Add(d), renewedAt: now, confirmed: true, sawEpoch: true}
	}
}

// Ended forgets a session that closed or expired; its waiting KeepAlive
// returns session_expired.
func (m *Manager) Ended(id uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[id]; ok {
		delete(m.leases, id)
		l.ended = true
		l.releaseWaiter()
		m.ackedLocked(l, l.acked) // releases WaitAcked: nobody is left to ack
		m.sawEpochLocked(l)
	}
}

// Deliver queues an event for the session and releases its KeepAlive.
func (m *Manager) Deliver(id uint64, ev api.Event) { m.queue(id, ev) }

// queue is Deliver, returning the event's seq (false: the session has no
// lease here).
func (m *Manager) queue(id uint64, ev api.Event) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	if !ok || !m.active {
		return 0, false
	}
	return m.queueLocked(id, l, ev), true
}

// queueLocked queues ev for session id (lease l) and returns its seq.
func (m *Manager) queueLocked(id uint64, l *lease, ev api.Event) uint64 {
	m.seq++
	if len(l.events) >= api.MaxPendingEvents {
		// Too far behind: tell the client to re-read everything instead.
		// The resync takes a seq above every event it replaces, so a
		// client that processed some of them still processes it. Replies
		// hold copies, so reusing the array is safe.
		m.dropped.Add(uint64(len(l.events)))
		l.events = append(l.events[:0], api.Event{Type: api.EventResync, Index: ev.Index, Seq: m.seq})
	} else if mutant.On(mutant.LoseEvents) && m.seq%8 == 0 {
		// Broken: the event is lost.
	} else {
		ev.Seq = m.seq
		l.events = append(l.events, ev)
	}
	l.releaseWaiter()
	if l.sub != nil {
		l.sub.note(id)
	}
	return m.seq
}

// Ack acknowledges a session's events up to Seq, under leader epoch Epoch.
type Ack struct{ Epoch, Seq uint64 }

// Renewal answers Renew.
type Renewal struct {
	Events []api.Event // unacknowledged events, oldest first (a copy)
	Lease  time.Duration
	Epoch  uint64 // the leadership that renewed the lease
}

// KeepAlive is Renew acknowledging nothing.
func (m *Manager) KeepAlive(ctx context.Context, id uint64, wait time.Duration) ([]api.Event, time.Duration, error) {
	r, err := m.Renew(ctx, id, wait, Ack{})
	return r.Events, r.Lease, err
}

// Renew extends the session's lease from now, drops the events ack
// covers (ignored unless ack.Epoch is this leadership's) and waits up to
// wait (at most half the lease) for events. It returns every event not yet
// acknowledged: nothing leaves the queue without an ack. A newer call for
// the session releases an older one still waiting. Errors: not_leader or
// unavailable when leadership changed under it; session_expired only once
// the state machine ended the session; ErrUnknown without a lease.
func (m *Manager) Renew(ctx context.Context, id uint64, wait time.Duration, ack Ack) (Renewal, error) {
	l, epoch, wait, r, err := m.renewStart(ctx, id, wait, ack)
	if l == nil {
		return r, err
	}
	w := &waiter{ch: make(chan struct{})}
	l.wake = w
	stopped := m.stopped
	m.mu.Unlock()

	waitWake(ctx, w.ch, stopped, wait)

	return m.renewalAfterWait(id, l, epoch, w)
}

// renewStart is Renew up to its wait: it renews the lease, confirms a
// first renewal under this leader, and answers at once (l nil: r or err)
// when there is nothing to wait for. Otherwise it returns with m.mu held,
// the lease, its epoch and the wait (at most half the lease): the caller
// parks on it and unlocks.
func (m *Manager) renewStart(ctx context.Context, id uint64, wait time.Duration, ack Ack) (l *lease, epoch uint64, _ time.Duration, r Renewal, err error) {
	m.keepAlives.Add(1)
	held := m.awaitThaw(ctx) // handover.go
	m.mu.Lock()
	l, epoch, err = m.renewLeaseLocked(id, ack)
	if err != nil {
		m.mu.Unlock()
		return nil, 0, 0, Renewal{}, err
	}
	if !l.confirmed {
		// First renewal under this leader: the state must know of it before
		// it is acknowledged, or the next leader would charge the session
		// this whole leadership as silence.
		m.mu.Unlock()
		if err := m.confirm(ctx, id); err != nil {
			return nil, 0, 0, Renewal{}, err
		}
		m.mu.Lock()
		if err := m.changedLocked(id, l, epoch); err != nil {
			m.mu.Unlock()
			return nil, 0, 0, Renewal{}, err
		}
		l.confirmed = true
	}
	// Half a lease at most: the client's attempt timeout is built on its
	// own wait, and a reply held longer would arrive after it gave up.
	wait = min(wait, l.dur/2) - held
	if len(l.events) > 0 || wait <= 0 {
		r := Renewal{Events: slices.Clone(l.events), Lease: l.dur, Epoch: epoch}
		m.mu.Unlock()
		return nil, 0, 0, r, nil
	}
	// Another KeepAlive of the session may have started waiting while
	// the lock was let go for the confirmation: this one supersedes it.
	if !mutant.On(mutant.ParkLostWaiter) {
		l.releaseWaiter()
	}
	return l, epoch, wait, Renewal{}, nil
}

// renewLeaseLocked extends session id's lease from now and applies ack;
// it refuses when this manager is not the leader, the session has no
// lease, or its expiry is in flight. It releases an older call still
// waiting for the session, and returns the lease and the leadership
// renewing it.
func (m *Manager) renewLeaseLocked(id uint64, ack Ack) (*lease, uint64, error) {
	if !m.active {
		return nil, 0, api.Errorf(api.CodeNotLeader, "not the leader")
	}
	if err := m.frozenLocked(); err != nil {
		return nil, 0, err
	}
	l, ok := m.leases[id]
	if !ok {
		return nil, 0, ErrUnknown
	}
	if l.expiring && !mutant.On(mutant.RenewExpiring) {
		// Its expiry is proposed, not yet applied (a deposed leader's
		// proposal is refused): the client retries, and learns the
		// session's fate from the state once the entry applies.
		return nil, 0, api.Errorf(api.CodeUnavailable, "session %d lease ran out; expiry in flight", id)
	}
	epoch := m.epoch
	l.renewedAt = m.cfg.Now()
	l.expiry = l.renewedAt.Add(l.dur)
	if ack.Epoch == epoch {
		l.ackLocked(ack.Seq)
		m.ackedLocked(l, ack.Seq)
		m.sawEpochLocked(l)
	}
	// One waiter per session: an older one (its client has moved on)
	// returns now, consuming nothing.
	l.releaseWaiter()
	return l, epoch, nil
}

// renewalAfterWait answers a Renew after its wait: why the lease is no
// longer current, if it is not, else the events not yet acknowledged.
func (m *Manager) renewalAfterWait(id uint64, l *lease, epoch uint64, wake *waiter) (Renewal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.changedLocked(id, l, epoch); err != nil {
		return Renewal{}, err
	}
	if l.wake == wake {
		l.wake = nil
	}
	return Renewal{Events: slices.Clone(l.events), Lease: l.dur, Epoch: epoch}, nil
}

// waitWake waits until wake closes, d passes, ctx ends or stopped
// closes (leadership ended).
func waitWake(ctx context.Context, wake, stopped <-chan struct{}, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-wake:
	case <-timer.C:
	case <-ctx.Done():
	case <-stopped:
	}
}

// changedLocked reports why lease l of session id, renewed under epoch, is
// no longer the manager's current one, if it is not. Only an end the state
// machine decided is session_expired; a manager that stopped or restarted
// under the caller says nothing about the session.
func (m *Manager) changedLocked(id uint64, l *lease, epoch uint64) error {
	switch cur, ok := m.leases[id]; {
	case l.ended:
		return api.Errorf(api.CodeSessionExpired, "session %d ended", id)
	case !m.active:
		return api.Errorf(api.CodeNotLeader, "leadership lost")
	case !ok || cur != l || m.epoch != epoch:
		return api.Errorf(api.CodeUnavailable, "session %d: leadership changed during the keepalive", id)
	}
	return nil
}

// ackLocked drops the events, and the pending invalidations, up to seq.
func (l *lease) ackLocked(seq uint64) {
	n := 0
	for n < len(l.events) && l.events[n].Seq <= seq {
		n++
	}
	if n > 0 {
		l.events = l.events[:copy(l.events, l.events[n:])]
	}
	n = 0
	for n < len(l.invals) && l.invals[n].seq <= seq {
		n++
	}
	if n > 0 {
		l.invals = l.invals[:copy(l.invals, l.invals[n:])]
	}
}

// ExpiriesIn is how many sessions this manager expired in the span
// before now (a minute at most).
func (m *Manager) ExpiriesIn(now time.Time, span time.Duration) int {
	return m.recentExpiries.Sum(now, span)
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
	t := time.NewTicker(m.cfg.CheckEvery)
	defer t.Stop()
	lt := time.NewTicker(m.cfg.TickEvery)
	defer lt.Stop()
	sem := make(chan struct{}, m.cfg.MaxConcurrentExpiries)
	for {
		select {
		case <-m.done:
			return
		case <-lt.C:
			m.tick()
			continue
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

// tick records how long this leader has led. Committed ticks are what a later
// leader charges a session that never renewed under this one.
func (m *Manager) tick() {
	if m.cfg.Tick == nil {
		return
	}
	m.mu.Lock()
	active, epoch, elapsed := m.active, m.epoch, m.cfg.Now().Sub(m.since)
	m.mu.Unlock()
	if !active {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.TickEvery)
	defer cancel()
	if err := m.cfg.Tick(ctx, epoch, elapsed); err != nil {
		m.cfg.Logger.Debug("leader tick not committed", "epoch", epoch, "err", err)
	}
}

// confirm adds a session to the pending confirm batch and waits for the
// batch to commit (group commit: one entry for every first KeepAlive that
// arrives together after a fail-over).
func (m *Manager) confirm(ctx context.Context, id uint64) error {
	return m.confirmAll(ctx, []uint64{id})
}

func (m *Manager) confirmLoop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.done:
			m.flushConfirms(api.Errorf(api.CodeUnavailable, "shutting down"))
			return
		case <-m.confirmKick:
		}
		select {
		case <-time.After(m.cfg.ConfirmDelay):
		case <-m.done:
			m.flushConfirms(api.Errorf(api.CodeUnavailable, "shutting down"))
			return
		}
		m.flushConfirms(nil)
	}
}

// flushConfirms commits the pending batch (or fails it with err).
func (m *Manager) flushConfirms(err error) {
	m.confirmMu.Lock()
	ids, done, errp := m.confirmIDs, m.confirmDone, m.confirmErr
	m.confirmIDs, m.confirmDone, m.confirmErr = nil, nil, nil
	m.confirmMu.Unlock()
	if done == nil {
		return
	}
	if err == nil {
		m.mu.Lock()
		active, epoch := m.active, m.epoch
		m.mu.Unlock()
		if !active {
			err = api.Errorf(api.CodeNotLeader, "leadership lost")
		}
		for i := 0; err == nil && i < len(ids); i += MaxSessionsPerConfirm {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = m.cfg.Confirm(ctx, epoch, ids[i:min(i+MaxSessionsPerConfirm, len(ids))])
			cancel()
		}
	}
	*errp = err
	close(done)
}

type due struct{ session, epoch uint64 }

// dueForExpiry marks up to limit run-out leases as expiring.
func (m *Manager) dueForExpiry(limit int) []due {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.active || m.frozen {
		// A hand-over holds renewals: its record decides who expires
		// (a renewal held now may yet go on if it is cancelled).
		return nil
	}
	var out []due
	for id, l := range m.leases {
		if len(out) >= limit {
			break
		}
		expiry := l.expiry
		if mutant.On(mutant.EarlyExpiry) {
			expiry = expiry.Add(-l.dur / 2)
		}
		if !l.expiring && now.After(expiry) {
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
		m.recentExpiries.Add(time.Now(), 1)
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
