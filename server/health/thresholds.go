// Package health assesses a cluster from what its lockds and lockproxies
// answered: a pure decision (no clock, no I/O: the time and every answer
// arrive in the Input), shared by the status page and lockctl status
// through GET /v1/status/health.
package health

import (
	"time"

	"github.com/lockservice/lockd/api"
)

// The thresholds a cell is judged by, from the spec where it names one.
const (
	// FsyncWarnMS: the spec's warning for a disk's fsync p99.
	FsyncWarnMS = 10.0
	// CommitWarnMS: the spec's acquire p99 target; a leader whose commits
	// alone take longer cannot meet it.
	CommitWarnMS = 50.0
	// ExpiriesWarnMin and ExpiriesWarnShare: expiries in a minute past
	// both the count and the share of the cell's sessions are a mass
	// expiry (clients cut off, a proxy gone), not churn.
	ExpiriesWarnMin   = 20
	ExpiriesWarnShare = 0.05
	// TokenHeadroomWarn: about 50 days of 2 000 writes/s before lock
	// creates are refused (token_exhausted).
	TokenHeadroomWarn = uint64(1) << 33
	// CommitMinSamples: fewer commits in the minute say nothing of its
	// p99 (the first entries of a new leadership are slow).
	CommitMinSamples = 20
	// CommitFailuresWarn: failed proposals in a minute worth a look.
	CommitFailuresWarn = 3
	// FsyncSlowMin and FsyncSlowShare: the probe runs once a second, so a
	// minute's p99 is its slowest probe; a disk is slow when at least
	// this many probes, and this share of them, passed FsyncWarnMS.
	FsyncSlowMin   = 3
	FsyncSlowShare = 0.05
	// QuotaWarnShare: a tenant's use of a quota (or a cell's of its
	// sessions limit) that deserves a look.
	QuotaWarnShare = 0.9
)

// InvalidationWarn: a change waiting on cache acknowledgements past the
// cache window is held by a cacher that missed its deadline.
const InvalidationWarn = api.CacheWindow

// MoveStuckAfter: a prefix move in flight this long has lost its driver
// (lockctl migrate resumes it).
const MoveStuckAfter = 5 * time.Minute

// ProxyBatchLate: a third of the default lease without a confirmed batch
// puts the proxy's sessions on the cell at risk.
const ProxyBatchLate = api.DefaultLease / 3

// ReplicaStalledAfter: a replica behind the leader whose applied index
// has not moved this long is not following (a frozen disk, a stuck step
// worker), though it answers at the leader's term.
const ReplicaStalledAfter = 10 * time.Second

// FsyncProbeStale: a lockd whose fsync probe (once a second) has not
// completed this long has a disk that hangs.
const FsyncProbeStale = 5 * time.Second
