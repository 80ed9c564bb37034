package lockd

import (
	"context"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/health"
)

// seenRecord is this lockd's soft memory for the health assessment: when
// each lockd last answered it, and since when each prefix move has been
// in flight. Both are bounded by the directory (pruned to its lockds and
// its moves at every assessment).
type seenRecord struct {
	mu       sync.Mutex
	answered map[uint64]time.Time
	moves    map[string]moveSeen
	lastLook time.Time // the last observe: a move not in it began after it
	applied  map[health.ReplicaKey]appliedSeen
	// unconfirmed: since when each proxy's cell has had sessions and no
	// batch confirmed (health.ProxyCellKey); only the proxies that answer.
	unconfirmed map[string]time.Time
}

// sawProxies records which proxies' cells have sessions and no batch
// confirmed, and returns since when each has.
func (r *seenRecord) sawProxies(proxies []api.ProxyHealth, now time.Time) map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[string]time.Time{}
	for _, p := range proxies {
		for _, c := range p.Cells {
			if c.Sessions == 0 || c.LastBatchAgeMS >= 0 {
				continue
			}
			k := health.ProxyCellKey(p.APIAddr, c.Cell)
			since, ok := r.unconfirmed[k]
			if !ok {
				since = now
			}
			next[k] = since
		}
	}
	r.unconfirmed = next
	out := make(map[string]time.Time, len(next))
	for k, v := range next {
		out[k] = v
	}
	return out
}

// appliedSeen is a replica's applied index, since when it has been
// there, and when it was last seen.
type appliedSeen struct {
	index      uint64
	since, saw time.Time
}

// sightingGap: a replica not seen for longer (its lockd down, this one
// restarted) has been nowhere we know of: it is dated afresh, not held
// stalled for the gap (checkQuorums looks every 5 s).
const sightingGap = 12 * time.Second

// sawStatus records the applied index of every replica in a lockd's
// status.
func (r *seenRecord) sawStatus(id uint64, st *api.StatusResponse, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.applied == nil {
		r.applied = map[health.ReplicaKey]appliedSeen{}
	}
	for _, rs := range st.Cells {
		k := health.ReplicaKey{Cell: rs.Cell, Lockd: id}
		old, ok := r.applied[k]
		if !ok || old.index != rs.AppliedIndex || now.Sub(old.saw) > sightingGap {
			old = appliedSeen{index: rs.AppliedIndex, since: now}
		}
		old.saw = now
		r.applied[k] = old
	}
}

// moveStart is when a move first seen at now began: the begin's own
// clock as the directory recorded it, unless it has none (begun by a lockd
// before it) or it is later than now (a clock ahead of this one's): then
// now, the first sighting. Never before notBefore, this lockd's last look
// at the directory that did not show the move (a proposer's clock behind
// this one's must not make a new move look stuck); zero: none yet (a
// lockd started since).
func moveStart(m *api.Migration, now, notBefore time.Time) time.Time {
	if m.BeganAtMS <= 0 || mutant.On(mutant.MoveAgeSeen) {
		return now
	}
	began := time.UnixMilli(m.BeganAtMS)
	if began.Before(notBefore) {
		began = notBefore
	}
	if began.Before(now) {
		return began
	}
	return now
}

type moveSeen struct {
	began uint64 // the move's BeganAt: a new move of the prefix starts afresh
	at    time.Time
}

// answer records that lockd id answered at now.
func (r *seenRecord) answer(id uint64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answered == nil {
		r.answered = map[uint64]time.Time{}
	}
	r.answered[id] = now
}

// observe prunes the record to dir and returns copies of it: the lockds'
// last answers and the moves' first sightings (now for a new one).
func (r *seenRecord) observe(dir api.DirectoryResponse, now time.Time) (map[uint64]time.Time, map[string]time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	answered := map[uint64]time.Time{}
	for _, l := range dir.Lockds {
		if at, ok := r.answered[l.ID]; ok {
			answered[l.ID] = at
		}
	}
	r.answered = answered
	moves, seen := map[string]moveSeen{}, map[string]time.Time{}
	for _, p := range dir.Prefixes {
		if p.Migration == nil {
			continue
		}
		m, ok := r.moves[p.Prefix]
		if !ok || m.began != p.Migration.BeganAt {
			m = moveSeen{began: p.Migration.BeganAt, at: moveStart(p.Migration, now, r.lastLook)}
		}
		moves[p.Prefix], seen[p.Prefix] = m, m.at
	}
	r.moves, r.lastLook = moves, now
	out := make(map[uint64]time.Time, len(answered))
	for id, at := range answered {
		out[id] = at
	}
	r.pruneApplied(dir)
	return out, seen
}

// pruneApplied keeps the replicas the directory lists (r.mu held).
func (r *seenRecord) pruneApplied(dir api.DirectoryResponse) {
	keep := map[health.ReplicaKey]bool{}
	for _, c := range dir.Cells {
		for _, rep := range c.Replicas {
			keep[health.ReplicaKey{Cell: c.Name, Lockd: rep.Lockd}] = true
		}
	}
	for k := range r.applied {
		if !keep[k] {
			delete(r.applied, k)
		}
	}
}

// appliedSince copies since when each replica has been at its applied
// index.
func (r *seenRecord) appliedSince() map[health.ReplicaKey]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[health.ReplicaKey]time.Time, len(r.applied))
	for k, a := range r.applied {
		out[k] = a.since
	}
	return out
}

// ClusterHealth asks every lockd and lockproxy of the directory for its
// status at once (a second each at most) and assesses the cluster
// (server/health). Tenants are left out unless admin.
func (p *Process) ClusterHealth(ctx context.Context, admin bool) api.ClusterHealth {
	var cs api.ClusterStatus
	var proxies []api.ProxyHealth
	dir := p.Directory().Response()
	var wg sync.WaitGroup
	wg.Go(func() { cs = p.ClusterStatus(ctx) })
	wg.Go(func() { proxies = p.proxyHealth(ctx, dir.Proxies) })
	wg.Wait()
	now := time.Now()
	p.seen.answer(p.cfg.Self().ID, now)
	for _, l := range cs.Lockds {
		if l.Status != nil {
			p.seen.sawStatus(l.ID, l.Status, now)
		}
	}
	answered, moves := p.seen.observe(dir, now)
	unconfirmed := p.seen.sawProxies(proxies, now)
	if !admin {
		dir.Tenants = nil
	}
	return health.Assess(health.Input{Now: now, Self: cs.Self, Dir: dir, Lockds: cs.Lockds, LastAnswered: answered, Proxies: proxies,
		MoveSeen: moves, AppliedSince: p.seen.appliedSince(), UnconfirmedSince: unconfirmed})
}

// proxyHealth asks each lockproxy for its status (a second at most).
func (p *Process) proxyHealth(ctx context.Context, infos []api.ProxyInfo) []api.ProxyHealth {
	out := make([]api.ProxyHealth, len(infos))
	var wg sync.WaitGroup
	for i, info := range infos {
		out[i] = api.ProxyHealth{APIAddr: info.APIAddr, Zone: info.Zone}
		wg.Go(func() {
			var st api.ProxyStatus
			if err := p.peerCallWithin(callBound(ctx), info.APIAddr, "GET", api.RouteStatus, nil, &st); err != nil {
				out[i].Error = err.Error()
				return
			}
			out[i].Version, out[i].Clients, out[i].Sessions, out[i].Cells = st.Version, st.Clients, st.Sessions, st.Cells
		})
	}
	wg.Wait()
	return out
}

// callBound is a status call's bound: a second, or less if ctx ends first.
func callBound(ctx context.Context) time.Duration {
	within := time.Second
	if d, ok := ctx.Deadline(); ok {
		within = min(within, time.Until(d))
	}
	return within
}
