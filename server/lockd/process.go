package lockd

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"time"

	"github.com/lni/dragonboat/v4"
	dblogger "github.com/lni/dragonboat/v4/logger"
	"github.com/lni/dragonboat/v4/raftio"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/server/backup"
	"github.com/lockservice/lockd/server/cell"
	"github.com/lockservice/lockd/server/httpapi"
)

// Process is a running lockd.
type Process struct {
	cfg      Config
	log      *slog.Logger
	nh       *dragonboat.NodeHost
	cells    map[string]*cell.Cell
	listener *leaderEvents
	http     *fasthttp.Server
	ln       net.Listener
	served   chan error

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

// Start starts a lockd: NodeHost, every cell's replica, and the API.
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

	p := &Process{cfg: cfg, log: log, cells: map[string]*cell.Cell{}, served: make(chan error, 1), stop: make(chan struct{})}
	p.listener = &leaderEvents{cells: map[uint64]*cell.Cell{}, last: map[uint64]raftio.LeaderInfo{}}
	nhc := nodeHostConfig(cfg)
	nhc.RaftEventListener = p.listener
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("nodehost: %w", err)
	}
	p.nh = nh

	members := map[uint64]string{}
	apiAddrs := map[uint64]string{}
	var endpoints []string
	for _, peer := range cfg.Peers {
		members[peer.ID] = peer.RaftAddr
		apiAddrs[peer.ID] = peer.APIAddr
		endpoints = append(endpoints, peer.APIAddr)
	}
	var infos []api.CellInfo
	for _, cc := range cfg.Cells {
		infos = append(infos, api.CellInfo{Name: cc.Name, ShardID: cc.ShardID, Prefixes: cc.Prefixes, Epoch: cc.Epoch, Endpoints: endpoints})
	}
	dir, err := directory.New(infos)
	if err != nil {
		nh.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fanout := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lockd_watch_events_per_write",
		Help:    "Watch events delivered by each committed write that changed a path, on the leader. A lock release should deliver 1; thousands mean a herd.",
		Buckets: []float64{0, 1, 2, 5, 10, 100, 1000, 10000},
	}, []string{"cell"})
	reg.MustRegister(fanout)
	for _, info := range dir.Cells() {
		c, err := cell.Start(nh, cell.Config{
			Info: info, ReplicaID: self.ID, Members: members, APIAddrs: apiAddrs,
			ElectionRTT: cfg.ElectionRTT, HeartbeatRTT: cfg.HeartbeatRTT,
			SnapshotEntries: cfg.SnapshotEntries, CompactionOverhead: cfg.CompactionOverhead,
			DefaultLease: time.Duration(cfg.Lease), Logger: log,
			Fanout: observeInt(fanout.WithLabelValues(info.Name)),
		})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("cell %s: %w", info.Name, err)
		}
		p.cells[info.Name] = c
		p.listener.register(info.ShardID, c)
		registerCellMetrics(reg, c)
	}

	srv := httpapi.New(dir, p.cells, p.Status, reg, log)
	if cfg.Pprof {
		srv.EnablePprof()
	}
	if cfg.BackupDir != "" {
		p.store = backup.Dir{Root: cfg.BackupDir}
		srv.EnableBackup(p.Backup)
		if every := time.Duration(cfg.BackupEvery); every > 0 {
			p.wg.Add(1)
			go p.backupLoop(every)
		}
	}
	p.http = &fasthttp.Server{
		Handler:            srv.Handler,
		ErrorHandler:       httpapi.ErrorHandler,
		Name:               "lockd",
		MaxRequestBodySize: api.MaxRequestBody,
		ReadTimeout:        api.MaxKeepAliveWait + 2*httpapi.RequestTimeout,
		WriteTimeout:       api.MaxKeepAliveWait + 2*httpapi.RequestTimeout,
		IdleTimeout:        2 * time.Minute,
		CloseOnShutdown:    true,
	}
	ln, err := net.Listen("tcp", self.APIAddr)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("api listen: %w", err)
	}
	p.ln = ln
	go func() { p.served <- p.http.Serve(ln) }()
	log.Info("lockd started", "api", self.APIAddr, "raft", self.RaftAddr, "data", cfg.DataDir, "cells", len(p.cells))
	return p, nil
}

// Served is closed with the HTTP server's exit error.
func (p *Process) Served() <-chan error { return p.served }

// Close hands off leadership of the cells this lockd leads, then stops the
// API, the cells and the NodeHost.
func (p *Process) Close() {
	var wg sync.WaitGroup
	for _, c := range p.cells {
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
		_ = p.http.Shutdown()
	}
	for _, c := range p.cells {
		c.Close()
	}
	if p.nh != nil {
		p.nh.Close()
	}
	p.log.Info("lockd stopped")
}

// Status reports every hosted cell as this replica sees it.
func (p *Process) Status() api.StatusResponse {
	self := p.cfg.Self()
	st := api.StatusResponse{ReplicaID: self.ID, APIAddr: self.APIAddr, RaftAddr: self.RaftAddr, Version: Version}
	for _, info := range p.sortedCells() {
		st.Cells = append(st.Cells, p.cells[info].Status())
	}
	return st
}

func (p *Process) sortedCells() []string {
	var names []string
	for _, cc := range p.cfg.Cells {
		if _, ok := p.cells[cc.Name]; ok {
			names = append(names, cc.Name)
		}
	}
	return names
}

func observeInt(o prometheus.Observer) func(int) {
	return func(n int) { o.Observe(float64(n)) }
}

func registerCellMetrics(reg *prometheus.Registry, c *cell.Cell) {
	labels := prometheus.Labels{"cell": c.Info().Name}
	gauge := func(name, help string, f func(cell.Counters) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(c.Counters()) }))
	}
	counter := func(name, help string, f func(cell.Counters) float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(c.Counters()) }))
	}
	gauge("lockd_session_leases", "Sessions with a lease on this replica (non-zero only on the leader).", func(k cell.Counters) float64 { return float64(k.Leases) })
	gauge("lockd_watches_armed", "One-shot watches armed on this replica.", func(k cell.Counters) float64 { return float64(k.ArmedWatches) })
	counter("lockd_keepalives_total", "KeepAlives received.", func(k cell.Counters) float64 { return float64(k.KeepAlives) })
	counter("lockd_keepalive_rounds_total", "ReadIndex rounds that confirmed KeepAlives (one round confirms every KeepAlive that joined before it).", func(k cell.Counters) float64 { return float64(k.KeepAliveRounds) })
	counter("lockd_session_expiries_total", "Sessions expired by this replica's session manager.", func(k cell.Counters) float64 { return float64(k.Expiries) })
	counter("lockd_watch_events_total", "Watch events delivered to sessions.", func(k cell.Counters) float64 { return float64(k.WatchEvents) })
	counter("lockd_dropped_events_total", "Events dropped by full session queues (replaced by a resync).", func(k cell.Counters) float64 { return float64(k.DroppedEvents) })
	snap := func(name, help string, f func(cell.SnapshotCounters) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, func() float64 { return f(c.SnapshotCounters()) }))
	}
	snap("lockd_snapshot_saves", "Snapshots this replica saved since it started.", func(k cell.SnapshotCounters) float64 { return float64(k.Saves) })
	snap("lockd_snapshot_last_bytes", "Size of the latest snapshot this replica saved (state machine part).", func(k cell.SnapshotCounters) float64 { return float64(k.LastBytes) })
	snap("lockd_snapshot_last_save_seconds", "How long the latest snapshot save took.", func(k cell.SnapshotCounters) float64 { return k.LastSave.Seconds() })
	snap("lockd_snapshot_restores", "Snapshots this replica restored since it started (at start, or sent by the leader).", func(k cell.SnapshotCounters) float64 { return float64(k.Restores) })
	snap("lockd_snapshot_last_restore_seconds", "How long the latest snapshot restore took.", func(k cell.SnapshotCounters) float64 { return k.LastRestore.Seconds() })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "lockd_token_index_headroom",
		Help:        "Raft entries the cell can still apply before lock creates are refused (token_exhausted: fencing-token index bits used up); NaN until the replica's state is readable.",
		ConstLabels: labels,
	}, func() float64 {
		if h, ok := c.TokenHeadroom(); ok {
			return float64(h)
		}
		return math.NaN()
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lockd_is_leader", Help: "1 if this replica leads the cell and its session manager runs.", ConstLabels: labels}, func() float64 {
		if c.Ready() == nil {
			return 1
		}
		return 0
	}))
}
