package lockd

import (
	"crypto/tls"
	"fmt"
	"log/slog"
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
	"github.com/lockservice/lockd/internal/listen"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/backup"
	"github.com/lockservice/lockd/server/cell"
	"github.com/lockservice/lockd/server/dirgroup"
	"github.com/lockservice/lockd/server/httpapi"
)

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
	mem, _ := memoryFor(cfg) // Validate checked it
	applyMemory(mem, log)

	p := &Process{cfg: cfg, log: log, cells: map[string]*cell.Cell{}, cellMetrics: map[string][]prometheus.Collector{}, served: make(chan error, 1), stop: make(chan struct{})}
	serverTLS, err := p.clientsAndTLS()
	if err != nil {
		return nil, err
	}
	if err := p.openAudit(); err != nil {
		return nil, err
	}
	if err := p.startNodeHost(); err != nil {
		return nil, err
	}
	view, err := directory.New(bootView(cfg))
	if err != nil {
		p.nh.Close()
		return nil, err
	}
	p.view.Store(view)
	p.registerMetrics()
	if err := p.startDirectoryReplica(); err != nil {
		p.nh.Close()
		return nil, err
	}
	if err := p.startCells(view); err != nil {
		p.Close()
		return nil, err
	}
	if err := p.serveAPI(serverTLS); err != nil {
		p.Close()
		return nil, err
	}
	p.startLoops()
	log.Info("lockd started", "api", self.APIAddr, "raft", self.RaftAddr, "data", cfg.DataDir, "cells", len(p.cells), "directory_replica", p.dir != nil, "zone", cfg.Zone)
	return p, nil
}

// clientsAndTLS makes the client for calls to other lockds and, with TLS
// files set, the API's server TLS config (nil without).
func (p *Process) clientsAndTLS() (*tls.Config, error) {
	var err error
	if p.peers, err = newPeerClient(p.cfg, "lockd"); err != nil {
		return nil, err
	}
	var serverTLS *tls.Config
	if p.cfg.TLSFiles().Set() {
		if serverTLS, err = p.cfg.TLSFiles().Server(); err != nil {
			return nil, err
		}
	}
	return serverTLS, nil
}

// startNodeHost starts the NodeHost, its Raft and system events going to
// the leader listener and the unloads.
func (p *Process) startNodeHost() error {
	p.listener = &leaderEvents{cells: map[uint64]*cell.Cell{}, last: map[uint64]raftio.LeaderInfo{}}
	p.unloads = newUnloads()
	nhc := nodeHostConfig(p.cfg)
	nhc.RaftEventListener = p.listener
	nhc.SystemEventListener = p.unloads
	p.probeFault = withFaults(&nhc, p.cfg.ReplicaID) // the fault suite's build only (faults_on.go)
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return fmt.Errorf("nodehost: %w", err)
	}
	p.nh = nh
	return nil
}

// registerMetrics makes the process's metrics registry: Go and process
// collectors, the watch fan-out histogram, the health metrics.
func (p *Process) registerMetrics() {
	p.metrics = prometheus.NewRegistry()
	p.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p.fanout = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lockd_watch_events_per_write",
		Help:    "Watch events delivered by each committed write that changed a path, on the leader, by cell and top-level prefix. A lock release should deliver 1; thousands mean a herd.",
		Buckets: []float64{0, 1, 2, 5, 10, 100, 1000, 10000},
	}, []string{"cell", "prefix"})
	p.metrics.MustRegister(p.fanout)
	p.health = newHealthMetrics(p.metrics)
}

// startDirectoryReplica starts this lockd's replica of the directory
// group, on a bootstrap member only.
func (p *Process) startDirectoryReplica() error {
	if !p.cfg.Member() {
		return nil
	}
	members := map[uint64]string{}
	for _, peer := range p.cfg.Peers {
		members[peer.ID] = peer.RaftAddr
	}
	var err error
	if p.dir, err = dirgroup.Start(p.nh, dirgroup.Config{ReplicaID: p.cfg.Self().ID, Members: members, ElectionRTT: p.cfg.ElectionRTT, HeartbeatRTT: p.cfg.HeartbeatRTT}); err != nil {
		return fmt.Errorf("directory replica: %w", err)
	}
	return nil
}

// startCells starts the replicas this lockd ran before, at once, from its
// own record (a restart does not wait for the directory), then the ones
// view places here.
func (p *Process) startCells(view *directory.Directory) error {
	known, err := readReplicas(p.cfg.DataDir)
	if err != nil {
		return err
	}
	for _, r := range known {
		if err := p.startCell(api.CellInfo{Name: r.Cell, ShardID: r.ShardID, Timing: r.Timing}, r.ReplicaID, nil, false, r.Learner, r.floors()); err != nil {
			return fmt.Errorf("cell %s: %w", r.Cell, err)
		}
	}
	return p.reconcile(view)
}

// serveAPI starts the API: the handler, the HTTP server, its listener
// (serverTLS on it when set), and the goroutine that serves.
func (p *Process) serveAPI(serverTLS *tls.Config) error {
	srv := p.newAPI(serverTLS)
	p.http = newHTTPServer(srv.Handler)
	p.apiSrv = srv
	srv.ServeConns(p.http.ServeConn)
	idle := p.http.IdleTimeout // fasthttp's own, or its ReadTimeout when unset
	if idle <= 0 {
		idle = p.http.ReadTimeout
	}
	if err := srv.ParkIdleConns(idle); err != nil {
		p.log.Warn("idle connections stay with the HTTP server", "err", err)
	}
	ln, err := p.listenAPI(serverTLS)
	if err != nil {
		return err
	}
	p.ln = ln
	go func() { p.served <- p.http.Serve(ln) }()
	return nil
}

// newAPI is the API's handler with the features cfg turns on: auth,
// client certificates, pprof, and backups (whose scheduled rounds start
// here, with BackupEvery).
func (p *Process) newAPI(serverTLS *tls.Config) *httpapi.Server {
	srv := httpapi.New(p, p.Status, p.metrics, p.log)
	srv.SetAudit(p.audit)
	if p.peers.token != "" {
		srv.EnableAuth(p.peers.token)
	}
	if serverTLS != nil {
		srv.RequireClientCerts()
	}
	if p.cfg.Pprof {
		srv.EnablePprof()
	}
	if p.cfg.BackupDir != "" {
		p.store = backup.Dir{Root: p.cfg.BackupDir}
		srv.EnableBackup(p.Backup)
		if every := time.Duration(p.cfg.BackupEvery); every > 0 {
			p.wg.Add(1)
			go p.every(every, p.backupRound)
		}
	}
	return srv
}

// newHTTPServer is the API's HTTP server over handler (httpapi's).
func newHTTPServer(handler fasthttp.RequestHandler) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:      handler,
		ErrorHandler: httpapi.ErrorHandler,
		Name:         "lockd",
		// At most MaxRequestBody is read before the request is
		// authenticated; a larger body (a KeepAlive batch, MaxBatchBody)
		// streams, and httpapi reads it only for a caller allowed to send it.
		MaxRequestBodySize: api.MaxRequestBody,
		StreamRequestBody:  true,
		// No route takes a form: fasthttp would otherwise read a
		// multipart body (to temporary files) before the handler.
		DisablePreParseMultipartForm: true,
		ReadTimeout:                  api.MaxKeepAliveWait + 2*httpapi.RequestTimeout,
		WriteTimeout:                 api.MaxKeepAliveWait + 2*httpapi.RequestTimeout,
		IdleTimeout:                  2 * time.Minute,
		CloseOnShutdown:              true,
		// The bound is the listener's (apiListener: past it a new
		// connection is answered 503 and closed), which counts a parked
		// connection too. fasthttp's counts those it serves, one twice
		// for a moment as it is handed back (its old worker not yet
		// done): at the listener's bound it would refuse one the
		// listener admitted.
		Concurrency: 2 * api.MaxConnectionsPerLockd,
		// An idle keep-alive connection gives its write buffer and body
		// buffers back between requests: about 11.7 KB each instead of
		// 15.9 KB (TestIdleConnCost; the 4 KB read buffer stays, as
		// StreamRequestBody keeps it: bench/RESULTS.md, Memory). One its
		// client uses sparsely is parked by httpapi instead (internal/connpark).
		ReduceMemoryUsage: true,
		// A parked KeepAlive's connection, and a parked idle one, is held
		// by httpapi (park.go, internal/connpark) and served again once answered or
		// spoken to (ServeConns, ParkIdleConns).
		KeepHijackedConns: true,
	}
}

// listenAPI listens on the API address: retrying when out of file
// descriptors, with serverTLS when set.
func (p *Process) listenAPI(serverTLS *tls.Config) (net.Listener, error) {
	raw, err := net.Listen("tcp", p.cfg.Self().APIAddr)
	if err != nil {
		return nil, fmt.Errorf("api listen: %w", err)
	}
	ln, limited := apiListener(raw, serverTLS, api.MaxConnectionsPerLockd)
	p.apiConns = limited
	return ln, nil
}

// apiListener is the API's listener over raw: it survives running out of
// file descriptors, holds at most max connections open (limited, which
// can close them all), and runs TLS when serverTLS is set.
func apiListener(raw net.Listener, serverTLS *tls.Config, max int) (ln net.Listener, limited *listen.Limited) {
	// Out of file descriptors, the API waits for one instead of ending.
	ln = listen.Retrying(raw)
	if mutant.On(mutant.FDExhaust) {
		ln = raw
	}
	// Every open connection counts, served or held parked (httpapi's
	// parked KeepAlives, which fasthttp's Concurrency no longer sees).
	if !mutant.On(mutant.ParkUncounted) {
		limited = listen.Limit(ln, max, serverTLS == nil)
		ln = limited
	}
	if serverTLS != nil {
		ln = tls.NewListener(ln, serverTLS) // clients must present a certificate the CA signed
	}
	return ln, limited
}

// startLoops starts the background loops: following the directory, the
// fsync probe, the quorum checks and, on a directory replica unless
// turned off, leader balancing.
func (p *Process) startLoops() {
	p.wg.Add(3)
	go p.followDirectory()
	go p.fsyncProbe()
	go p.every(5*time.Second, p.checkQuorums)
	if p.dir != nil && !p.cfg.NoLeaderBalance {
		p.wg.Add(1)
		go p.balanceLeaders()
	}
}
