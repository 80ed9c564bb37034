package lockd

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/internal/listen"
	"github.com/lockservice/lockd/server/audit"
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
	apiConns *listen.Limited // the API's open connections (nil under a mutant)
	apiSrv   *httpapi.Server // the API's handler (its parked KeepAlives close with it)
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
	metrics *prometheus.Registry
	fanout  *prometheus.HistogramVec
	health  *healthMetrics
	// probeFault, in the fault suite's build, runs before the fsync
	// probe's sync as before every NodeHost sync (faults_on.go).
	probeFault func() error
	// probe is the fsync probe's recent record (fsyncstat.go); seen the
	// soft record of peers' answers, replicas' progress and moves
	// (seen.go).
	probe fsyncRecord
	seen  seenRecord
	// cellMetrics are each running replica's collectors (cellsMu).
	cellMetrics map[string][]prometheus.Collector
	peers       peerClient // directory reads and registration, on a lockd without a directory replica

	store    backup.Store // nil without --backup-dir
	backupMu sync.Mutex
	audit    *audit.Log // the audit log (audit.go)
	// stopping is set when Close begins (its status says so: leader
	// balancing hands it nothing while it hands its leaderships off).
	stopping atomic.Bool
	stop     chan struct{}
	wg       sync.WaitGroup
}

// Served is closed with the HTTP server's exit error.
func (p *Process) Served() <-chan error { return p.served }

// httpShutdownTimeout bounds how long Close waits for the API's open
// connections.
const httpShutdownTimeout = 3 * time.Second

// Close hands off leadership of the cells this lockd leads, then stops the
// API, the cells and the NodeHost.
func (p *Process) Close() {
	p.stopping.Store(true)
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
	if p.apiSrv != nil {
		p.apiSrv.Close() // parked KeepAlives' connections
	}
	if p.http != nil {
		// Long polls (KeepAlives, proxies' batches, watches) may hold
		// connections for up to api.MaxKeepAliveWait: the API gets
		// httpShutdownTimeout to close, then the cells stop anyway.
		ctx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		if err := p.http.ShutdownWithContext(ctx); err != nil {
			closed := 0
			if p.apiConns != nil {
				closed = p.apiConns.CloseAll() // their clients go to another replica
			}
			p.log.Warn("API connections still open at shutdown; closed", "err", err, "closed", closed)
		}
		cancel()
		if p.apiSrv != nil {
			p.apiSrv.CloseServing()
		}
	}
	p.cellsMu.Lock()
	for _, c := range p.cells {
		c.Close()
	}
	p.cellsMu.Unlock()
	if p.nh != nil {
		p.nh.Close()
	}
	p.closeAudit()
	p.log.Info("lockd stopped")
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
