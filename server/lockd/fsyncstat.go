package lockd

import (
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/recent"
	"github.com/lockservice/lockd/server/cell"
	"github.com/lockservice/lockd/server/health"
)

// fsyncRecord is the fsync probe's recent record, for the status: its
// latencies, its failures, and when it last completed (a disk that
// hangs stops it).
type fsyncRecord struct {
	samples  recent.Window // ms
	failures recent.Counter
	mu       sync.Mutex
	last     time.Time // monotonic; zero: no probe yet
}

// done records one probe that took took and ended in err.
func (r *fsyncRecord) done(now time.Time, took time.Duration, err error) {
	if err != nil {
		r.failures.Add(now, 1)
	} else {
		r.samples.Add(now, took.Seconds()*1000)
	}
	r.mu.Lock()
	r.last = now
	r.mu.Unlock()
}

// started dates the probe's start: a first probe that hangs shows its
// age from here.
func (r *fsyncRecord) started(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last.IsZero() {
		r.last = now
	}
}

// status fills a lockd's status with the probe's last minute.
func (r *fsyncRecord) status(now time.Time, st *api.StatusResponse) {
	st.FsyncP99MS, st.FsyncProbes = r.samples.Quantile(now, cell.HealthSpan, 0.99)
	st.FsyncSlowProbes, _ = r.samples.Over(now, cell.HealthSpan, health.FsyncWarnMS)
	st.FsyncFailures = r.failures.Sum(now, cell.HealthSpan)
	r.mu.Lock()
	defer r.mu.Unlock()
	st.FsyncProbeAgeMS = -1
	if !r.last.IsZero() {
		st.FsyncProbeAgeMS = max(now.Sub(r.last), 0).Milliseconds()
	}
}
