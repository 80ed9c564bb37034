package proxy

// A cell's sessions as this proxy renews them: its clients' KeepAlives end
// here, and the proxy renews them all with one batch per second to the
// cell's leader (a long poll that also brings their events), plus an
// urgent batch when a session is new here or acknowledges an
// invalidation a write is waiting for.

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

const (
	// batchWait is how long the leader holds the main batch (it answers
	// at once when a session has an event): one batch per cell and second
	// with the default 12 s lease. A cell whose sessions have shorter
	// leases gets lease/12 (at least minBatchWait), so a client's lease is
	// confirmed within a sixth of it.
	batchWait    = time.Second
	minBatchWait = 100 * time.Millisecond
	// minBatchGap spaces main batches when events end them early.
	minBatchGap = 10 * time.Millisecond
	// urgentGather lets urgent sessions arriving together share a batch.
	urgentGather = 2 * time.Millisecond
	// maxAnsweredLeaseAge: a KeepAlive whose wait is over is answered at
	// once if the lease it confirms (its session's last confirmed batch)
	// is under lease/maxAnsweredLeaseAge old; an older one waits for the
	// batch that carries it.
	maxAnsweredLeaseAge = 4
	// forgetAfter drops a session whose client has been silent this long
	// past its lease (it moved to another proxy, or is gone).
	forgetAfter = 30 * time.Second
)

// errNothing: no session to renew.
var errNothing = errors.New("no sessions")

// cellTable is one cell's sessions on this proxy.
type cellTable struct {
	name  string
	proxy string // this proxy's name: the leader tells it of its sessions' events
	up    *sdk.Client
	m     *metrics
	// live reports whether a tenant still holds a token (nil: all do);
	// the sessions of one that does not are not renewed.
	live func(tenant string) bool

	mu       sync.Mutex
	sessions map[uint64]*proxySession
	// holds are the clients' KeepAlives held (keepalive.go): at most one
	// per session, and those superseded or woken until their next step.
	holds  map[*heldKA]struct{}
	epoch  uint64
	index  uint64
	lastOK time.Time // when the last confirmed batch was built
	// lastReply is when the leader last answered a batch: the proxy
	// reaches the cell (a long poll is answered within its wait).
	lastReply time.Time
	batches   uint64

	kick chan struct{} // an urgent batch is wanted

	// The shared cache (shared.go): cachers are the clients the proxy
	// served each path to as cacheable; gen rises with every
	// invalidation and fail-over (a read that began under another gen
	// is not made cacheable); acked is closed at a client's next
	// acknowledgement.
	instance string
	// sharedCache reads the proxy's own session on the cell: its id and
	// the cache window it has left; sharedID is the one the last grant
	// counted from.
	sharedCache func(cell string) (session uint64, left time.Duration)
	sharedID    uint64
	cachers     map[string]map[uint64]struct{}
	// lapses counts, per tenant, its clients whose grant ran out with an
	// invalidation unacknowledged: at api.MaxCacheMissesPerTenant none
	// of its clients is served cacheable on this cell again (a new
	// session per write does not renew the attack), as at the leader.
	lapses      map[string]int
	log         *slog.Logger       // nil in unit tests
	flights     map[string]*flight // reads of the shared cache under way, by path
	nextFlights map[string]*flight // the next ones, collecting reads
	gen         uint64
	acked       chan struct{}
	ctx         context.Context
	// watches are the shared watches by path and kind (watches.go);
	// quota counts its clients' waits per tenant (the proxy's, over all
	// cells).
	watches map[watchKey]*sharedWatch
	quota   *watchQuota
}

func newCellTable(ctx context.Context, name, proxy, instance string, up *sdk.Client, m *metrics) *cellTable {
	t := &cellTable{name: name, proxy: proxy, up: up, m: m, sessions: map[uint64]*proxySession{}, kick: make(chan struct{}, 1),
		watches: map[watchKey]*sharedWatch{}, quota: &watchQuota{per: map[string]int{}},
		instance: instance, cachers: map[string]map[uint64]struct{}{}, lapses: map[string]int{}, flights: map[string]*flight{}, nextFlights: map[string]*flight{}, ctx: ctx}
	if up != nil {
		t.sharedCache = up.SharedCache
	}
	return t
}

// forgetLocked drops a session from the table.
func (t *cellTable) forgetLocked(ps *proxySession) {
	if t.sessions[ps.id] == ps {
		delete(t.sessions, ps.id)
		for path := range ps.cached {
			if set := t.cachers[path]; set != nil {
				delete(set, ps.id)
				if len(set) == 0 {
					delete(t.cachers, path)
				}
			}
		}
		t.dropWatchesLocked(ps)
		if ps.gone != nil {
			close(ps.gone)
		}
		t.notifyAcksLocked()
	}
}

func (t *cellTable) kickUrgent() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// wakeLocked answers the session's held KeepAlive.
func (t *cellTable) wakeLocked(ps *proxySession) {
	if w := ps.waiter; w != nil {
		w.wakeLocked()
		ps.waiter = nil
	}
}

// prune forgets sessions whose clients are long gone, and returns the
// shortest lease of the rest.
func (t *cellTable) prune(now time.Time) (minLease time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	minLease = api.DefaultLease
	for _, ps := range t.sessions {
		if ps.waiter == nil && now.Sub(ps.lastKA) > ps.leaseOrDefault()+forgetAfter {
			t.forgetLocked(ps)
			continue
		}
		minLease = min(minLease, ps.leaseOrDefault())
	}
	return minLease
}

// opened records a session its client opened through this proxy: the
// leader's lease began after the open reached the proxy.
func (t *cellTable) opened(id uint64, secret string, lease time.Duration, arrived time.Time, tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.sessions[id]
	if ps == nil {
		ps = newProxySession(id)
		t.sessions[id] = ps
	}
	ps.lease, ps.lastKA, ps.base, ps.err = lease, arrived, arrived, nil
	ps.secret, ps.tenant = secret, tenant // the cell's own reply
}

// adopt records a session new to this proxy whose KeepAlive the leader
// just accepted (its secret with it): the next urgent batch confirms it
// here. A session already known is left as it is.
func (t *cellTable) adopt(id uint64, secret, tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessions[id] != nil {
		return
	}
	ps := newProxySession(id)
	ps.secret, ps.tenant = secret, tenant
	t.sessions[id] = ps
}

// owner is the tenant of a session this proxy renews, and whether it does.
func (t *cellTable) owner(id uint64) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.sessions[id]
	if ps == nil {
		return "", false
	}
	return ps.tenant, true
}

// closed forgets a session its client closed (with its secret: the
// cell refuses a close without it, and so does the proxy).
func (t *cellTable) closed(id uint64, secret string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ps := t.sessions[id]; ps != nil && subtle.ConstantTimeCompare([]byte(ps.secret), []byte(secret)) == 1 {
		ps.err = api.Errorf(api.CodeSessionExpired, "session %d closed", id)
		t.wakeLocked(ps)
		t.forgetLocked(ps)
	}
}

// status is the table's part of the proxy's status.
func (t *cellTable) status(now time.Time) api.ProxyCellStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := api.ProxyCellStatus{Cell: t.name, Epoch: t.epoch, Sessions: len(t.sessions), Batches: t.batches, LastBatchAgeMS: -1}
	if !t.lastOK.IsZero() {
		st.LastBatchAgeMS = now.Sub(t.lastOK).Milliseconds()
	}
	return st
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
