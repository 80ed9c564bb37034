package lockd

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	dblogger "github.com/lni/dragonboat/v4/logger"
	"github.com/lni/dragonboat/v4/raftio"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/internal/listen"
	"github.com/lockservice/lockd/server/backup"
	"github.com/lockservice/lockd/server/cell"
	"github.com/lockservice/lockd/server/dirgroup"
	"github.com/lockservice/lockd/server/httpapi"
)

// Process is a running lockd.
type Process struct {
	cfg      Config
	log      *slog.Logger
	nh       *dragonboat.NodeHost
	listener *leaderEvents
	unloads  *unloads
	http     *fasthttp.Server
	ln       net.Listener
	served   chan error

	// dir is this lockd's replica of the directory group (nil on a lockd
	// that is not a bootstrap member); view is the latest directory it
	// knows, which it routes by and places its replicas from.
	dir  *dirgroup.Group
	view atomic.Pointer[directory.Directory]
	// cells are the replicas this lockd runs, by cell name; they come and
	// go as the directory places them (reconcile).
	cellsMu sync.RWMutex
	cells   map[string]*cell.Cell
	// unloading are the shards whose replica here was stopped and may not
	// have unloaded yet (cellsMu): startCell waits for it.
	unloading map[uint64]<-chan struct{}
	metrics   *prometheus.Registry
	fanout    *prometheus.HistogramVec
	health    *healthMetrics
	// cellMetrics are each running replica's collectors (cellsMu).
	cellMetrics map[string][]prometheus.Collector
	peers       peerClient // directory reads and registration, on a lockd without a directory replica

	store    backup.Store // nil without --backup-dir
	backupMu sync.Mutex
	stop     chan struct{}
	wg       sync.WaitGroup
}

// leaderEvents routes the NodeHost's leader updates to cells. Updates that
// arrive before a cell registers are kept and replayed.
type leaderEvents struct {
	mu    sync.Mutex
	cells map[uint64]*cell.Cell
	last  map[uint64]raftio.LeaderInfo
}

func (l *leaderEvents) LeaderUpdated(info raftio.LeaderInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[info.ShardID] = info
	if c, ok := l.cells[info.ShardID]; ok {
		c.LeaderUpdated(info)
	}
}

func (l *leaderEvents) unregister(shardID uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.cells, shardID)
}

func (l *leaderEvents) register(shardID uint64, c *cell.Cell) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cells[shardID] = c
	if info, ok := l.last[shardID]; ok {
		c.LeaderUpdated(info)
	}
}

var quietOnce sync.Once

// quietDragonboat keeps dragonboat's own logging to warnings and errors.
func quietDragonboat() {
	quietOnce.Do(func() {
		for _, name := range []string{"config", "dragonboat", "gossip", "logdb", "LogDB", "pebblekv", "raft", "raft-mt", "raftpb", "registry", "rsm", "server", "settings", "tan", "tools", "transport"} {
			dblogger.GetLogger(name).SetLevel(dblogger.WARNING)
		}
		// Elections are routine; raft logs each step of one as a warning.
		dblogger.GetLogger("raft").SetLevel(dblogger.ERROR)
	})
}

// Start starts a lockd: NodeHost, the directory replica (on a bootstrap
// member), the cell replicas it ran before and the bootstrap cells, the
// API, and the loop that follows the directory.
func Start(cfg Config, log *slog.Logger) (*Process, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	quietDragonboat()
	self := cfg.Self()
	log = log.With("replica", self.ID)

	p := &Process{cfg: cfg, log: log, cells: map[string]*cell.Cell{}, unloading: map[uint64]<-chan struct{}{}, cellMetrics: map[string][]prometheus.Collector{}, served: make(chan error, 1), stop: make(chan struct{})}
	var err error
	if p.peers, err = newPeerClient(cfg, "lockd"); err != nil {
		return nil, err
	}
	var serverTLS *tls.Config
	if cfg.TLSFiles().Set() {
		if serverTLS, err = cfg.TLSFiles().Server(); err != nil {
			return nil, err
		}
	}
	p.listener = &leaderEvents{cells: map[uint64]*cell.Cell{}, last: map[uint64]raftio.LeaderInfo{}}
	p.unloads = newUnloads()
	nhc := nodeHostConfig(cfg)
	nhc.RaftEventListener = p.listener
	nhc.SystemEventListener = p.unloads
	withFaults(&nhc, cfg.ReplicaID) // the fault suite's build only (faults_on.go)
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("nodehost: %w", err)
	}
	p.nh = nh

	boot := bootView(cfg)
	view, err := directory.New(boot)
	if err != nil {
		nh.Close()
		return nil, err
	}
	p.view.Store(view)
	p.metrics = prometheus.NewRegistry()
	p.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p.fanout = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lockd_watch_events_per_write",
		Help:    "Watch events delivered by each committed write that changed a path, on the leader, by cell and top-level prefix. A lock release should deliver 1; thousands mean a herd.",
		Buckets: []float64{0, 1, 2, 5, 10, 100, 1000, 10000},
	}, []string{"cell", "prefix"})
	p.metrics.MustRegister(p.fanout)
	p.health = newHealthMetrics(p.metrics)

	if cfg.Member() {
		members := map[uint64]string{}
		for _, peer := range cfg.Peers {
			members[peer.ID] = peer.RaftAddr
		}
		if p.dir, err = dirgroup.Start(nh, dirgroup.Config{ReplicaID: self.ID, Members: members, ElectionRTT: cfg.ElectionRTT, HeartbeatRTT: cfg.HeartbeatRTT}); err != nil {
			nh.Close()
			return nil, fmt.Errorf("directory replica: %w", err)
		}
	}
	// The replicas this lockd ran before start at once, from its own
	// record: a restart does not wait for the directory.
	known, err := readReplicas(cfg.DataDir)
	if err != nil {
		p.Close()
		return nil, err
	}
	for _, r := range known {
		if err := p.startCell(api.CellInfo{Name: r.Cell, ShardID: r.ShardID, Timing: r.Timing}, r.ReplicaID, nil, false, r.Learner, r.floors()); err != nil {
			p.Close()
			return nil, fmt.Errorf("cell %s: %w", r.Cell, err)
		}
	}
	if err := p.reconcile(view); err != nil {
		p.Close()
		return nil, err
	}

	srv := httpapi.New(p, p.Status, p.metrics, log)
	if p.peers.token != "" {
		srv.EnableAuth(p.peers.token)
	}
	if serverTLS != nil {
		srv.RequireClientCerts()
	}
	if cfg.Pprof {
		srv.EnablePprof()
	}
	if cfg.BackupDir != "" {
		p.store = backup.Dir{Root: cfg.BackupDir}
		srv.EnableBackup(p.Backup)
		if every := time.Duration(cfg.BackupEvery); every > 0 {
			p.wg.Add(1)
			go p.every(every, p.backupRound)
		}
	}
	p.http = &fasthttp.Server{
		Handler:      srv.Handler,
		ErrorHandler: httpapi.ErrorHandler,
		Name:         "lockd",
		// At most MaxRequestBody is read before the request is
		// authenticated; a larger body (a KeepAlive batch, MaxBatchBody)
		// streams, and httpapi reads it only for a caller allowed to send it.
		MaxRequestBodySize: api.MaxRequestBody,
		StreamRequestBody:  true,
		ReadTimeout:        api.MaxKeepAliveWait + 2*httpapi.RequestTimeout,
		WriteTimeout:       api.MaxKeepAliveWait + 2*httpapi.RequestTimeout,
		IdleTimeout:        2 * time.Minute,
		CloseOnShutdown:    true,
		// Past it a new connection is answered 503 and closed.
		Concurrency: api.MaxConnectionsPerLockd,
	}
	raw, err := net.Listen("tcp", self.APIAddr)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("api listen: %w", err)
	}
	// Out of file descriptors, the API waits for one instead of ending.
	var ln net.Listener = listen.Retrying(raw)
	if brokenFDExhaust {
		ln = raw
	}
	if serverTLS != nil {
		ln = tls.NewListener(ln, serverTLS) // clients must present a certificate the CA signed
	}
	p.ln = ln
	go func() { p.served <- p.http.Serve(ln) }()
	p.wg.Add(3)
	go p.followDirectory()
	go p.fsyncProbe()
	go p.every(5*time.Second, p.checkQuorums)
	if p.dir != nil && !cfg.NoLeaderBalance {
		p.wg.Add(1)
		go p.balanceLeaders()
	}
	log.Info("lockd started", "api", self.APIAddr, "raft", self.RaftAddr, "data", cfg.DataDir, "cells", len(p.cells), "directory_replica", p.dir != nil, "zone", cfg.Zone)
	return p, nil
}

// Served is closed with the HTTP server's exit error.
func (p *Process) Served() <-chan error { return p.served }

// httpShutdownTimeout bounds how long Close waits for the API's open
// connections.
const httpShutdownTimeout = 3 * time.Second

// Close hands off leadership of the cells this lockd leads, then stops the
// API, the cells and the NodeHost.
func (p *Process) Close() {
	var wg sync.WaitGroup
	for _, c := range p.allCells() {
		wg.Add(1)
		go func(c *cell.Cell) {
			defer wg.Done()
			c.HandOff(2 * time.Second)
		}(c)
	}
	wg.Wait()
	close(p.stop)
	p.wg.Wait()
	if p.http != nil {
		// Long polls (KeepAlives, proxies' batches, watches) may hold
		// connections for up to api.MaxKeepAliveWait: the API gets
		// httpShutdownTimeout to close, then the cells stop anyway.
		ctx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		if err := p.http.ShutdownWithContext(ctx); err != nil {
			p.log.Warn("API connections still open at shutdown; stopping anyway", "err", err)
		}
		cancel()
	}
	p.cellsMu.Lock()
	for _, c := range p.cells {
		c.Close()
	}
	p.cellsMu.Unlock()
	if p.nh != nil {
		p.nh.Close()
	}
	p.log.Info("lockd stopped")
}

// Status reports every hosted cell as this replica sees it.
func (p *Process) Status() api.StatusResponse {
	self := p.cfg.Self()
	st := api.StatusResponse{ReplicaID: self.ID, APIAddr: self.APIAddr, RaftAddr: self.RaftAddr, Version: Version}
	st.Zone = p.cfg.Zone
	st.DirectoryReplica = p.dir != nil
	if p.dir != nil {
		st.DirectoryLeader, _ = p.dir.Leader()
	}
	st.DirectoryIndex = p.view.Load().Index()
	cells := p.allCells()
	sort.Slice(cells, func(i, j int) bool { return cells[i].Info().Name < cells[j].Info().Name })
	for _, c := range cells {
		st.Cells = append(st.Cells, c.Status())
	}
	return st
}

// allCells lists the replicas this lockd runs.
func (p *Process) allCells() []*cell.Cell {
	p.cellsMu.RLock()
	defer p.cellsMu.RUnlock()
	out := make([]*cell.Cell, 0, len(p.cells))
	for _, c := range p.cells {
		out = append(out, c)
	}
	return out
}

// Cell returns the replica of a cell this lockd runs.
func (p *Process) Cell(name string) (*cell.Cell, bool) {
	p.cellsMu.RLock()
	defer p.cellsMu.RUnlock()
	c, ok := p.cells[name]
	return c, ok
}

// Directory is the latest directory this lockd knows.
func (p *Process) Directory() *directory.Directory { return p.view.Load() }

// observeFanout records a write's watch events under its cell and prefix.
func observeFanout(h *prometheus.HistogramVec, cell string) func(prefix string, events int) {
	return func(prefix string, n int) { h.WithLabelValues(cell, prefix).Observe(float64(n)) }
}

// registerCellMetrics registers c's metrics and returns them, so that
// they can be unregistered when the replica stops (it was removed).
func registerCellMetrics(reg *prometheus.Registry, c *cell.Cell) []prometheus.Collector {
	var all []prometheus.Collector
	register := func(col prometheus.Collector) {
		reg.MustRegister(col)
		all = append(all, col)
	}
	labels := prometheus.Labels{"cell": c.Info().Name}
	gauge := func(name, help string, f func(cell.Counters) float64) {
		register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(c.Counters()) }))
	}
	counter := func(name, help string, f func(cell.Counters) float64) {
		register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(c.Counters()) }))
	}
	commits := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lockd_commit_seconds",
		Help:        "Proposal to commit and apply on this replica (the leader proposes), committed proposals only.",
		ConstLabels: labels, Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5}})
	proposals := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockd_proposals_total",
		Help: "Proposals this replica made, by result (committed, or failed: timeout, leadership lost).", ConstLabels: labels}, []string{"result"})
	register(commits)
	register(proposals)
	committed, failed := proposals.WithLabelValues("committed"), proposals.WithLabelValues("failed")
	c.OnCommit(func(d time.Duration, ok bool) {
		if ok {
			commits.Observe(d.Seconds())
			committed.Inc()
		} else {
			failed.Inc()
		}
	})
	gauge("lockd_session_leases", "Sessions with a lease on this replica (non-zero only on the leader).", func(k cell.Counters) float64 { return float64(k.Leases) })
	gauge("lockd_watches_armed", "One-shot watches armed on this replica.", func(k cell.Counters) float64 { return float64(k.ArmedWatches) })
	counter("lockd_keepalives_total", "KeepAlive RPCs received from clients (a proxy's batch counts in lockd_keepalive_batches_total).", func(k cell.Counters) float64 { return float64(k.KeepAlives) })
	counter("lockd_keepalive_batches_total", "KeepAlive batches received from lockproxies (one RPC renewing many sessions).", func(k cell.Counters) float64 { return float64(k.KeepAliveBatches) })
	counter("lockd_keepalive_batched_sessions_total", "Session renewals carried by KeepAlive batches.", func(k cell.Counters) float64 { return float64(k.BatchedSessions) })
	counter("lockd_keepalive_rounds_total", "ReadIndex rounds that confirmed KeepAlives (one round confirms every KeepAlive that joined before it).", func(k cell.Counters) float64 { return float64(k.KeepAliveRounds) })
	counter("lockd_session_expiries_total", "Sessions expired by this replica's session manager.", func(k cell.Counters) float64 { return float64(k.Expiries) })
	counter("lockd_watch_events_total", "Watch events delivered to sessions.", func(k cell.Counters) float64 { return float64(k.WatchEvents) })
	counter("lockd_dropped_events_total", "Events dropped by full session queues (replaced by a resync).", func(k cell.Counters) float64 { return float64(k.DroppedEvents) })
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
	snap := func(name, help string, f func(cell.SnapshotCounters) float64) {
		register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(c.SnapshotCounters()) }))
	}
	snap("lockd_snapshot_saves", "Snapshots this replica saved since it started.", func(k cell.SnapshotCounters) float64 { return float64(k.Saves) })
	snap("lockd_snapshot_last_bytes", "Size of the latest snapshot this replica saved (state machine part).", func(k cell.SnapshotCounters) float64 { return float64(k.LastBytes) })
	snap("lockd_snapshot_last_save_seconds", "How long the latest snapshot save took.", func(k cell.SnapshotCounters) float64 { return k.LastSave.Seconds() })
	snap("lockd_snapshot_restores", "Snapshots this replica restored since it started (at start, or sent by the leader).", func(k cell.SnapshotCounters) float64 { return float64(k.Restores) })
	snap("lockd_snapshot_last_restore_seconds", "How long the latest snapshot restore took.", func(k cell.SnapshotCounters) float64 { return k.LastRestore.Seconds() })
	register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "lockd_token_index_headroom",
		Help:        "Raft entries the cell can still apply before lock creates are refused (token_exhausted: fencing-token index bits used up); NaN until the replica's state is readable.",
		ConstLabels: labels,
	}, func() float64 {
		if h, ok := c.TokenHeadroom(); ok {
			return float64(h)
		}
		return math.NaN()
	}))
	register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lockd_is_leader", Help: "1 if this replica leads the cell and its session manager runs.", ConstLabels: labels}, func() float64 {
		if c.Ready() == nil {
			return 1
		}
		return 0
	}))
	return all
}

// ClusterStatus asks every lockd of the directory for its status at once
// (a second each at most; itself without a call), for the status page.
func (p *Process) ClusterStatus(ctx context.Context) api.ClusterStatus {
	self := p.cfg.Self()
	lockds := p.Directory().Response().Lockds
	out := api.ClusterStatus{Self: self.APIAddr, Lockds: make([]api.LockdStatus, len(lockds))}
	var wg sync.WaitGroup
	for i, l := range lockds {
		out.Lockds[i] = api.LockdStatus{ID: l.ID, APIAddr: l.APIAddr, Zone: l.Zone}
		if l.ID == self.ID {
			st := p.Status()
			out.Lockds[i].Status = &st
			continue
		}
		wg.Add(1)
		go func(ls *api.LockdStatus) {
			defer wg.Done()
			within := time.Second
			if d, ok := ctx.Deadline(); ok {
				within = min(within, time.Until(d))
			}
			var st api.StatusResponse
			if err := p.peerCallWithin(within, ls.APIAddr, "GET", api.RouteStatus, nil, &st); err != nil {
				ls.Error = err.Error()
				return
			}
			ls.Status = &st
		}(&out.Lockds[i])
	}
	wg.Wait()
	return out
}

// CallLockd makes one API call to another lockd as this one, marked as
// forwarded (the other lockd serves it itself).
func (p *Process) CallLockd(ctx context.Context, addr, method, route string, body, out any) error {
	within := peerTimeout
	if d, ok := ctx.Deadline(); ok {
		within = min(within, time.Until(d))
	}
	pc := p.peers
	pc.forwarded = true
	return callPeer(pc, within, addr, method, route, body, out)
}
