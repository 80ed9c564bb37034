package session

// KeepAlive batches: a lockproxy renews every session of its clients on
// one cell in one call, once a second, and long-polls for their events.

import (
	"context"
	"slices"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// BatchEntry is one session of a batch.
type BatchEntry struct {
	Session uint64
	// Age is how long before the batch was sent its client's last
	// KeepAlive reached the proxy: the lease is extended from then.
	Age time.Duration
	Ack Ack
	// Seen is the highest event seq the proxy holds (under the batch's
	// epoch): the wait ends only for events after it.
	Seen uint64
	// New asks for a report even with nothing to say (the proxy needs
	// the lease length).
	New bool
}

// BatchRenewal answers RenewBatch.
type BatchRenewal struct {
	Epoch uint64
	// Reports: sessions with events the proxy has not seen, new ones, and
	// those whose renewal failed (Error set).
	Reports []api.BatchSession
	// Unknown are sessions without a lease here: the caller asks the
	// state whether they ended.
	Unknown []uint64
	// Renewed are the sessions renewed, for the confirming ReadIndex.
	Renewed []uint64
}

// subscriber is a proxy as the leader knows it: the sessions with events
// since its last batch answered (of those it renewed last), and the wake
// of its waiting batch. Events of a proxy's sessions thus end its long
// poll however few sessions that batch carries, and a batch answers with
// just the sessions that have news: events cost the proxy small batches,
// not a resend of every session.
type subscriber struct {
	pending map[uint64]struct{}
	wake    chan struct{} // closed when pending gains a session; nil when none waits
}

func newSubscriber() *subscriber { return &subscriber{pending: map[uint64]struct{}{}} }

// note records an event for session id (under the manager's lock).
func (s *subscriber) note(id uint64) {
	s.pending[id] = struct{}{}
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

// waitChan is the channel closed at the next note.
func (s *subscriber) waitChan() chan struct{} {
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

type batchItem struct {
	id   uint64
	l    *lease
	seen uint64
	new  bool
}

// batchRun is one RenewBatch call in progress: the leadership it renews
// under, the proxy's subscriber, the answer so far, the sessions renewed
// and those of them not yet confirmed under this leader.
type batchRun struct {
	cur         uint64
	sub         *subscriber
	out         BatchRenewal
	items       []batchItem
	unconfirmed []uint64
}

// RenewBatch renews many sessions at once: each lease is extended to
// now − Age + its length (never shortened), acknowledged events are
// dropped, and the sessions become proxy's (its name: "" for none). The
// call answers at once with the sessions that have news (events the
// proxy has not seen, given its Seen under epoch, New ones, failures),
// and any other session of the proxy that got an event since its last
// batch; with none it waits up to wait for one. Nothing leaves a queue
// without an ack, as with Renew. Errors: not_leader when leadership is
// lost; per session, in the reports.
func (m *Manager) RenewBatch(ctx context.Context, proxy string, epoch uint64, entries []BatchEntry, wait time.Duration) (BatchRenewal, error) {
	m.batches.Add(1)
	m.batchSessions.Add(uint64(len(entries)))
	wait -= m.awaitThaw(ctx) // handover.go
	now := m.cfg.Now()
	b, err := m.renewEntries(proxy, epoch, entries, now)
	if err != nil {
		return BatchRenewal{}, err
	}

	if len(b.unconfirmed) > 0 {
		// First renewals under this leader: the state must know of them
		// before they are acknowledged (as in Renew).
		if err := m.confirmAll(ctx, b.unconfirmed); err != nil {
			return BatchRenewal{}, err
		}
	}

	wake, stopped, answered := m.reportOrWait(b, wait)
	if answered {
		return b.out, nil
	}

	waitWake(ctx, wake, stopped, min(wait, api.MaxBatchWait))

	return m.reportAfterWait(b)
}

// renewEntries renews each entry's lease (renewEntryLocked) under one hold
// of the lock, and makes the sessions the proxy's.
func (m *Manager) renewEntries(proxy string, epoch uint64, entries []BatchEntry, now time.Time) (*batchRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.active {
		return nil, api.Errorf(api.CodeNotLeader, "not the leader")
	}
	if err := m.frozenLocked(); err != nil {
		return nil, err
	}
	cur := m.epoch
	b := &batchRun{cur: cur, sub: m.subscriberLocked(proxy), out: BatchRenewal{Epoch: cur}, items: make([]batchItem, 0, len(entries))}
	for _, e := range entries {
		m.renewEntryLocked(b, e, epoch, now)
	}
	return b, nil
}

// subscriberLocked is the proxy's subscriber, made at its first batch; a
// batch without a proxy gets one of its own.
func (m *Manager) subscriberLocked(proxy string) *subscriber {
	sub := newSubscriber()
	if proxy != "" {
		if m.subs[proxy] == nil {
			m.subs[proxy] = sub
		}
		sub = m.subs[proxy]
	}
	return sub
}

// renewEntryLocked renews one entry's lease: an unknown session goes to
// Unknown, one whose expiry is in flight gets a failed report, any other
// is extended, acknowledged and recorded in b.
func (m *Manager) renewEntryLocked(b *batchRun, e BatchEntry, epoch uint64, now time.Time) {
	l, ok := m.leases[e.Session]
	if !ok {
		b.out.Unknown = append(b.out.Unknown, e.Session)
		return
	}
	if l.expiring && !mutant.On(mutant.RenewExpiring) {
		b.out.Reports = append(b.out.Reports, api.BatchSession{Session: e.Session,
			Error: api.Errorf(api.CodeUnavailable, "session %d lease ran out; expiry in flight", e.Session)})
		return
	}
	if exp := now.Add(l.dur - max(e.Age, 0)); exp.After(l.expiry) {
		l.expiry = exp
	}
	// The client's cache window counts from before the proxy's
	// arrival time (now − Age): now is later, the safe side.
	l.renewedAt = now
	if e.Ack.Epoch == b.cur {
		l.ackLocked(e.Ack.Seq)
		m.ackedLocked(l, e.Ack.Seq)
		m.sawEpochLocked(l)
	}
	seen := l.acked
	if epoch == b.cur {
		seen = max(seen, e.Seen)
	}
	if !l.confirmed {
		b.unconfirmed = append(b.unconfirmed, e.Session)
	}
	// The latest proxy to renew a session is the one told of its
	// events (its client moved there).
	l.sub = b.sub
	b.items = append(b.items, batchItem{id: e.Session, l: l, seen: seen, new: e.New})
	b.out.Renewed = append(b.out.Renewed, e.Session)
}

// reportOrWait marks the confirmed sessions so, then answers with the
// reports if there are any (or no wait): answered. Otherwise it returns
// what to wait on: the proxy's wake and the leadership's end.
func (m *Manager) reportOrWait(b *batchRun, wait time.Duration) (wake, stopped chan struct{}, answered bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(b.unconfirmed) > 0 {
		for _, it := range b.items {
			if !it.l.confirmed && m.changedLocked(it.id, it.l, b.cur) == nil {
				it.l.confirmed = true
			}
		}
	}
	reports := m.batchReportsLocked(b.items, b.sub, b.cur)
	if len(reports) > 0 || wait <= 0 {
		b.out.Reports = append(b.out.Reports, reports...)
		return nil, nil, true
	}
	return b.sub.waitChan(), m.stopped, false
}

// reportAfterWait answers after the wait: not_leader if leadership
// changed meanwhile, else the reports.
func (m *Manager) reportAfterWait(b *batchRun) (BatchRenewal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.active || m.epoch != b.cur {
		return BatchRenewal{}, api.Errorf(api.CodeNotLeader, "leadership lost during the keepalive batch")
	}
	b.out.Reports = append(b.out.Reports, m.batchReportsLocked(b.items, b.sub, b.cur)...)
	return b.out, nil
}

// batchReportsLocked lists the sessions with something to say: those of
// the batch with events after what the proxy has seen, new ones or failed
// ones, and the proxy's other sessions that got events since its last
// batch answered (it dedupes events by seq).
//
// The reply carries at most api.MaxBatchReplyEvents events: a session
// whose events do not fit is left for a later reply (a new one is still
// reported, without them; a pending one stays pending).
func (m *Manager) batchReportsLocked(items []batchItem, sub *subscriber, epoch uint64) []api.BatchSession {
	var out []api.BatchSession
	reported := make(map[uint64]bool, len(sub.pending))
	budget := api.MaxBatchReplyEvents
	take := func(l *lease) []api.Event {
		if len(l.events) > budget && !mutant.On(mutant.BatchReplyEvents) {
			return nil
		}
		budget -= len(l.events)
		return slices.Clone(l.events)
	}
	for _, it := range items {
		if err := m.changedLocked(it.id, it.l, epoch); err != nil {
			out = append(out, api.BatchSession{Session: it.id, Error: api.AsError(err)})
			reported[it.id] = true
			continue
		}
		n := len(it.l.events)
		if !it.new && (n == 0 || it.l.events[n-1].Seq <= it.seen) {
			continue
		}
		evs := take(it.l)
		if evs == nil && n > 0 && !it.new {
			continue // over the budget: the next reply
		}
		out = append(out, api.BatchSession{Session: it.id, LeaseMS: it.l.dur.Milliseconds(), Events: evs})
		reported[it.id] = true
	}
	for id := range sub.pending {
		l, ok := m.leases[id]
		if reported[id] || !ok || l.sub != sub || len(l.events) == 0 {
			delete(sub.pending, id)
			continue // ended (its next renewal says so), moved to another proxy, or acknowledged
		}
		if evs := take(l); evs != nil {
			delete(sub.pending, id)
			out = append(out, api.BatchSession{Session: id, LeaseMS: l.dur.Milliseconds(), Events: evs})
		}
	}
	return out
}

// confirmAll adds sessions to the pending confirm entry and waits for it.
func (m *Manager) confirmAll(ctx context.Context, ids []uint64) error {
	if m.cfg.Confirm == nil {
		return nil
	}
	m.confirmMu.Lock()
	if m.confirmDone == nil {
		m.confirmDone = make(chan struct{})
		m.confirmErr = new(error)
	}
	m.confirmIDs = append(m.confirmIDs, ids...)
	done, errp := m.confirmDone, m.confirmErr
	m.confirmMu.Unlock()
	select {
	case m.confirmKick <- struct{}{}:
	default:
	}
	select {
	case <-done:
		return *errp
	case <-ctx.Done():
		return api.Errorf(api.CodeUnavailable, "confirm: %v", ctx.Err())
	}
}

// BatchStats returns the batches received and the sessions they carried.
func (m *Manager) BatchStats() (batches, sessions uint64) {
	return m.batches.Load(), m.batchSessions.Load()
}
