package lockd

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockservice/lockd/server/cell"
)

// observeFanout records a write's watch events under its cell and prefix.
func observeFanout(h *prometheus.HistogramVec, cell string) func(prefix string, events int) {
	return func(prefix string, n int) { h.WithLabelValues(cell, prefix).Observe(float64(n)) }
}

// registerCellMetrics registers c's metrics and returns them, so that
// they can be unregistered when the replica stops (it was removed).
func registerCellMetrics(reg *prometheus.Registry, c *cell.Cell) []prometheus.Collector {
	m := &cellCollectors{reg: reg, c: c, labels: prometheus.Labels{"cell": c.Info().Name}}
	m.commits()
	m.sessionsAndWatches()
	m.cache()
	m.snapshots()
	m.tokensAndLeadership()
	return m.all
}

// cellCollectors registers one cell's collectors, labelled with its name,
// and keeps them for unregistering.
type cellCollectors struct {
	reg    *prometheus.Registry
	c      *cell.Cell
	labels prometheus.Labels
	all    []prometheus.Collector
}

func (m *cellCollectors) register(col prometheus.Collector) {
	m.reg.MustRegister(col)
	m.all = append(m.all, col)
}

func (m *cellCollectors) gauge(name, help string, f func(cell.Counters) float64) {
	c := m.c
	m.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: m.labels}, func() float64 { return f(c.Counters()) }))
}

func (m *cellCollectors) counter(name, help string, f func(cell.Counters) float64) {
	c := m.c
	m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: m.labels}, func() float64 { return f(c.Counters()) }))
}

// commits are the commit latency and the proposals by result, fed by the
// cell's commit hook.
func (m *cellCollectors) commits() {
	labels := m.labels
	commits := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lockd_commit_seconds",
		Help:        "Proposal to commit and apply on this replica (the leader proposes), committed proposals only.",
		ConstLabels: labels, Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5}})
	proposals := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockd_proposals_total",
		Help: "Proposals this replica made, by result (committed, or failed: timeout, leadership lost).", ConstLabels: labels}, []string{"result"})
	m.register(commits)
	m.register(proposals)
	committed, failed := proposals.WithLabelValues("committed"), proposals.WithLabelValues("failed")
	m.c.OnCommit(func(d time.Duration, ok bool) {
		if ok {
			commits.Observe(d.Seconds())
			committed.Inc()
		} else {
			failed.Inc()
		}
	})
}

// sessionsAndWatches are the leases, watches, KeepAlives, expiries and
// watch events.
func (m *cellCollectors) sessionsAndWatches() {
	m.gauge("lockd_session_leases", "Sessions with a lease on this replica (non-zero only on the leader).", func(k cell.Counters) float64 { return float64(k.Leases) })
	m.gauge("lockd_watches_armed", "One-shot watches armed on this replica.", func(k cell.Counters) float64 { return float64(k.ArmedWatches) })
	m.counter("lockd_keepalives_total", "KeepAlive RPCs received from clients (a proxy's batch counts in lockd_keepalive_batches_total).", func(k cell.Counters) float64 { return float64(k.KeepAlives) })
	m.counter("lockd_keepalive_batches_total", "KeepAlive batches received from lockproxies (one RPC renewing many sessions).", func(k cell.Counters) float64 { return float64(k.KeepAliveBatches) })
	m.counter("lockd_keepalive_batched_sessions_total", "Session renewals carried by KeepAlive batches.", func(k cell.Counters) float64 { return float64(k.BatchedSessions) })
	m.counter("lockd_keepalive_rounds_total", "ReadIndex rounds that confirmed KeepAlives (one round confirms every KeepAlive that joined before it).", func(k cell.Counters) float64 { return float64(k.KeepAliveRounds) })
	m.counter("lockd_handovers_total", "Planned leadership hand-overs from this replica whose leadership moved (each session's silence passed on).", func(k cell.Counters) float64 { return float64(k.HandOvers) })
	m.counter("lockd_handovers_failed_total", "Planned leadership hand-overs from this replica whose leadership did not move (cancelled, or renewals held until the cancel commits).", func(k cell.Counters) float64 { return float64(k.HandOversFailed) })
	m.counter("lockd_session_expiries_total", "Sessions expired by this replica's session manager.", func(k cell.Counters) float64 { return float64(k.Expiries) })
	m.counter("lockd_watch_events_total", "Watch events delivered to sessions.", func(k cell.Counters) float64 { return float64(k.WatchEvents) })
	m.counter("lockd_dropped_events_total", "Events dropped by full session queues (replaced by a resync).", func(k cell.Counters) float64 { return float64(k.DroppedEvents) })
}

// cache are the leader's cache records and its invalidations.
func (m *cellCollectors) cache() {
	c, labels, register := m.c, m.labels, m.register
	cache := func(name, help string, f func(cell.CacheCounters) float64) {
		register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(c.CacheCounters()) }))
	}
	cache("lockd_cache_paths", "Nodes some client caches, as the leader records them.", func(k cell.CacheCounters) float64 { return float64(k.CachedPaths) })
	cache("lockd_cache_cachers", "(node, session) cache entries the leader records.", func(k cell.CacheCounters) float64 { return float64(k.Cachers) })
	cache("lockd_cache_invalidation_oldest_seconds", "How long the oldest change still waiting for its cachers' acknowledgements has waited (0 if none).", func(k cell.CacheCounters) float64 { return k.OldestChange.Seconds() })
	register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockd_cache_invalidations_sent_total", Help: "Cache invalidations sent to sessions before a change.", ConstLabels: labels}, func() float64 { return float64(c.CacheCounters().InvalidationsSent) }))
	register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockd_cache_invalidations_acked_total", Help: "Cache invalidations acknowledged (or whose session's lease ran out).", ConstLabels: labels}, func() float64 { return float64(c.CacheCounters().InvalidationsAcked) }))
	register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockd_cache_invalidation_deadlines_missed_total", Help: "Cache invalidations whose deadline (a cache window after the cacher's last renewal) passed unacknowledged: the write went on.", ConstLabels: labels}, func() float64 { return float64(c.CacheCounters().DeadlinesMissed) }))
	register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockd_cache_cachers_revoked_total", Help: "Sessions refused as cachers for the rest of the leadership after missing an invalidation deadline.", ConstLabels: labels}, func() float64 { return float64(c.CacheCounters().Revoked) }))
	register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockd_cache_grants_over_quota_total", Help: "Cacheable reads served uncached because the reader's tenant had no write of its writes per second to spend on the committed grant.", ConstLabels: labels}, func() float64 { return float64(c.CacheCounters().GrantsOverQuota) }))
	for limit, f := range map[string]func(cell.CacheCounters) uint64{"session": func(k cell.CacheCounters) uint64 { return k.OverSessionCap }, "tenant": func(k cell.CacheCounters) uint64 { return k.OverTenantCap }} {
		l := prometheus.Labels{"limit": limit}
		for k, v := range labels {
			l[k] = v
		}
		register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockd_cache_uncached_over_cap_total", Help: "Cacheable reads served uncached because the session or its tenant had the most cache entries allowed (api.MaxCachedPathsPerSession, api.MaxCachedPathsPerTenant).", ConstLabels: l}, func() float64 { return float64(f(c.CacheCounters())) }))
	}
}

// snapshots are the replica's snapshot saves and restores.
func (m *cellCollectors) snapshots() {
	c, labels, register := m.c, m.labels, m.register
	snap := func(name, help string, f func(cell.SnapshotCounters) float64) {
		register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(c.SnapshotCounters()) }))
	}
	snap("lockd_snapshot_saves", "Snapshots this replica saved since it started.", func(k cell.SnapshotCounters) float64 { return float64(k.Saves) })
	snap("lockd_snapshot_last_bytes", "Size of the latest snapshot this replica saved (state machine part).", func(k cell.SnapshotCounters) float64 { return float64(k.LastBytes) })
	snap("lockd_snapshot_last_save_seconds", "How long the latest snapshot save took.", func(k cell.SnapshotCounters) float64 { return k.LastSave.Seconds() })
	snap("lockd_snapshot_restores", "Snapshots this replica restored since it started (at start, or sent by the leader).", func(k cell.SnapshotCounters) float64 { return float64(k.Restores) })
	snap("lockd_snapshot_last_restore_seconds", "How long the latest snapshot restore took.", func(k cell.SnapshotCounters) float64 { return k.LastRestore.Seconds() })
}

// tokensAndLeadership are the fencing-token headroom and whether this
// replica leads.
func (m *cellCollectors) tokensAndLeadership() {
	c, labels := m.c, m.labels
	m.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "lockd_token_index_headroom",
		Help:        "Raft entries the cell can still apply before lock creates are refused (token_exhausted: fencing-token index bits used up); NaN until the replica's state is readable.",
		ConstLabels: labels,
	}, func() float64 {
		if h, ok := c.TokenHeadroom(); ok {
			return float64(h)
		}
		return math.NaN()
	}))
	m.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lockd_is_leader", Help: "1 if this replica leads the cell and its session manager runs.", ConstLabels: labels}, func() float64 {
		if c.Ready() == nil {
			return 1
		}
		return 0
	}))
}
