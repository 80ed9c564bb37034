package lockd

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockservice/lockd/api"
)

// healthMetrics are a lockd's measures of its own disk and of its cells'
// replicas, for the dashboards and the alerts in deploy/monitoring.
type healthMetrics struct {
	fsync        prometheus.Histogram
	voters, upGV *prometheus.GaugeVec
}

func newHealthMetrics(reg *prometheus.Registry) *healthMetrics {
	h := &healthMetrics{
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockd_fsync_seconds",
			Help:    "Latency of a 4 KiB write and fsync in the data directory, probed every second: the disk every commit waits on (the Raft log shares its filesystem).",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1},
		}),
		voters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockd_cell_voters",
			Help: "Voting replicas of each cell this lockd leads, as the directory lists them.",
		}, []string{"cell"}),
		upGV: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockd_cell_voters_up",
			Help: "Voting replicas of each cell this lockd leads that answer and follow this leader's term (checked every 5 s). At a bare majority one more loss stops the cell.",
		}, []string{"cell"}),
	}
	reg.MustRegister(h.fsync, h.voters, h.upGV)
	return h
}

// fsyncProbe measures the data directory's fsync once a second until the
// process stops (p.wg counted by the caller).
func (p *Process) fsyncProbe() {
	path := filepath.Join(p.cfg.DataDir, "fsync-probe")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		p.wg.Done()
		p.log.Warn("fsync probe off", "err", err)
		return
	}
	defer func() { f.Close(); os.Remove(path) }()
	block := make([]byte, 4096)
	p.probe.started(time.Now())
	p.every(time.Second, func() {
		start := time.Now()
		err := probeSync(f, block, p.probeFault)
		took := time.Since(start)
		p.probe.done(start.Add(took), took, err)
		if err == nil {
			p.health.fsync.Observe(took.Seconds())
		}
	})
}

// probeSync writes block at the start of f and syncs it (after fault,
// the fault suite's hook, if any).
func probeSync(f *os.File, block []byte, fault func() error) error {
	if _, err := f.WriteAt(block, 0); err != nil {
		return err
	}
	if fault != nil {
		if err := fault(); err != nil {
			return err
		}
	}
	return f.Sync()
}

// checkQuorums sets, for every cell this lockd leads, how many of its
// voting replicas are up: this one, and each other whose lockd answers
// its status with the cell at this leader's term. A cell it does not lead
// has no series here (the leader's is the one to read).
func (p *Process) checkQuorums() {
	view := p.Directory()
	// Moves are dated from when this lockd first saw them in flight: seen
	// here every 5 s, not only when someone asks for the health.
	p.seen.observe(view.Response(), time.Now())
	own := p.Status()
	p.seen.sawStatus(own.ReplicaID, &own, time.Now())
	self := p.cfg.Self().ID
	statuses := map[uint64]*api.StatusResponse{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, l := range view.Response().Lockds {
		if l.ID == self {
			continue
		}
		wg.Add(1)
		go func(l api.LockdInfo) {
			defer wg.Done()
			var st api.StatusResponse
			if p.peerCallWithin(time.Second, l.APIAddr, "GET", api.RouteStatus, nil, &st) == nil {
				p.seen.answer(l.ID, time.Now())
				p.seen.sawStatus(l.ID, &st, time.Now())
				mu.Lock()
				statuses[l.ID] = &st
				mu.Unlock()
			}
		}(l)
	}
	wg.Wait()
	for _, info := range view.Cells() {
		c, ok := p.Cell(info.Name)
		st := api.ReplicaStatus{}
		if ok {
			st = c.Status()
		}
		if !ok || st.Role != "leader" {
			p.health.voters.DeleteLabelValues(info.Name)
			p.health.upGV.DeleteLabelValues(info.Name)
			continue
		}
		voters, up := 0, 0
		for _, r := range info.Replicas {
			if r.Learner {
				continue
			}
			voters++
			if r.Lockd == self {
				up++
				continue
			}
			if other := statuses[r.Lockd]; other != nil {
				for _, rs := range other.Cells {
					if rs.Cell == info.Name && rs.Term == st.Term {
						up++
						break
					}
				}
			}
		}
		p.health.voters.WithLabelValues(info.Name).Set(float64(voters))
		p.health.upGV.WithLabelValues(info.Name).Set(float64(up))
	}
}
