package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// Config configures a run. The zero value (with a Duration) is the
// production-timed run of `make chaos`; Short is the fixed, quick one of
// `go test`.
type Config struct {
	// Seed chooses the schedule and every worker's random choices.
	Seed int64
	// Duration bounds the fault phase: no step starts after it.
	Duration time.Duration
	// Rounds, if positive, stops the schedule after that many rounds (a
	// round is every nemesis once, the leader and holder ones more often).
	Rounds int
	// Short: test timing (20 ms Raft ticks, 5 s lease) and fewer clients.
	Short bool
	// NoPartitions runs without network namespaces (no partition
	// nemeses). Without it, a machine that cannot make namespaces (no
	// root, no `ip netns`) fails the run, unless the environment says
	// CHAOS_NO_PARTITIONS=1.
	NoPartitions bool
	// NoProxies runs no lockproxy: every worker talks to the replicas and
	// the kill-proxy nemesis is skipped.
	NoProxies bool
	// NoHostile runs without the hostile tenant (hostile.go).
	NoHostile bool
	// HostileRate bounds the hostile tenant's credential attacks, in
	// requests per second over every lockd and proxy (its session attacks
	// add a few tens a second).
	HostileRate int

	RTTMillisecond int
	Lease          time.Duration
	// RaftDelay, if set, puts every replica's Raft traffic through a
	// relay adding that much each way (cluster.Options.RaftDelay): a
	// cell across regions. Its cells then run CellTiming (default
	// GlobalCellTiming), and Lease and Grace follow it.
	RaftDelay  cluster.Delay
	CellTiming string
	// Grace is the clients' jeopardy grace the session checker allows
	// (default api.DefaultGrace, or the cell timing's).
	Grace time.Duration
	// SnapshotEntries is lockd's --snapshot-entries; 0 keeps lockd's
	// default (100 000, production).
	SnapshotEntries int
	// SideBulk is how many nodes are put under /side before the faults,
	// so that a copy takes several pages (default 1200 short, else 3000).
	SideBulk int

	Locks, WorkersPerLock, SharedReaders, Candidates           int
	ConfigClients, ConfigKeys, Churners, AckedWriters, Probers int
	// Guarders is how many holders of one lock write through Mutex.Guard
	// (workload_guard.go; default 2).
	Guarders int
	// SemaphorePermits is the N of the semaphore workload's semaphore
	// (default 3) and SemaphoreWorkers how many contend (default 2N).
	SemaphorePermits, SemaphoreWorkers int
	// EtcdMutexWorkers, EtcdLockWorkers and EtcdCandidates are the etcd
	// workload's clients through the proxies' etcd gateways
	// (workload_etcd.go): concurrency.Mutex holders, Lock service holders
	// and concurrency.Election campaigners (default 2 each short, 3 each
	// else; negative: none).
	EtcdMutexWorkers, EtcdLockWorkers, EtcdCandidates int

	CallTimeout    time.Duration // bounds one workload call with its retries
	LockWait       time.Duration // TryLock and Campaign timeout
	RequestTimeout time.Duration // SDK attempt timeout of workers (0: SDK default)
	Think          time.Duration // pause between a worker's operations, up to
	ObservePeriod  time.Duration // observer: between listings
	ProbeTimeout   time.Duration // prober: attempt timeout
	ProbeCall      time.Duration // prober: one put with its retries
	ProbeGap       time.Duration // prober: between puts
	HolderPrepare  time.Duration // holder process: between preparing a write and sending it

	FailoverBound time.Duration // leader loss → first commit, at most
	TakeoverBound time.Duration // holder death → next grant, at most
	RecoveryBound time.Duration // heal → ready leader, at most
	LivenessBound time.Duration // faults stopped → every waiter granted, at most

	LinearizabilityTimeout time.Duration

	electionMS int64 // the cells' own election timeout (CellTiming), 0: ticks

	// Dir keeps the cluster's data and logs (and the holders' log); by
	// default a temporary directory removed unless a violation was found.
	Dir string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defi := func(d *int, v int) {
		if *d == 0 {
			*d = v
		}
	}
	// A cell across regions: its own timing, and the bounds follow it.
	if c.RaftDelay.Max > 0 {
		if c.CellTiming == "" {
			c.CellTiming = GlobalCellTiming
		}
		if t, err := api.ParseCellTiming(c.CellTiming); err == nil {
			def(&c.Lease, time.Duration(t.LeaseMS)*time.Millisecond)
			def(&c.Grace, time.Duration(t.GraceMS)*time.Millisecond)
			c.electionMS = t.ElectionMS
		}
	}
	if c.Short {
		defi(&c.RTTMillisecond, 20)
		def(&c.Lease, 5*time.Second)
		defi(&c.Locks, 2)
		defi(&c.WorkersPerLock, 2)
		defi(&c.SharedReaders, 2)
		defi(&c.Candidates, 2)
		defi(&c.ConfigClients, 2)
		defi(&c.Churners, 1)
		defi(&c.AckedWriters, 1)
		def(&c.RequestTimeout, 2*time.Second)
		def(&c.ProbeTimeout, 200*time.Millisecond)
		def(&c.ProbeCall, 500*time.Millisecond)
		defi(&c.HostileRate, 60)
		defi(&c.EtcdMutexWorkers, 2)
		defi(&c.EtcdLockWorkers, 2)
		defi(&c.EtcdCandidates, 2)
	} else {
		defi(&c.RTTMillisecond, 100)
		def(&c.Lease, 12*time.Second)
		defi(&c.Locks, 2)
		defi(&c.WorkersPerLock, 3)
		defi(&c.SharedReaders, 2)
		defi(&c.Candidates, 3)
		defi(&c.ConfigClients, 3)
		defi(&c.Churners, 2)
		defi(&c.AckedWriters, 2)
		// The probes' attempt is the fail-over figures' resolution: a
		// probe sent to a hung leader finds the new one on its next
		// attempt (500 ms made every pause-leader 1.58 s or 2.1 s).
		def(&c.ProbeTimeout, 250*time.Millisecond)
		def(&c.ProbeCall, time.Second)
		defi(&c.HostileRate, 200)
		defi(&c.EtcdMutexWorkers, 3)
		defi(&c.EtcdLockWorkers, 3)
		defi(&c.EtcdCandidates, 3)
	}
	def(&c.Grace, api.DefaultGrace)
	defi(&c.ConfigKeys, 2)
	defi(&c.Guarders, 2)
	defi(&c.Probers, 2)
	def(&c.CallTimeout, 2*c.Lease+10*time.Second)
	def(&c.LockWait, c.Lease+10*time.Second)
	def(&c.Think, 50*time.Millisecond)
	def(&c.ObservePeriod, 25*time.Millisecond)
	def(&c.ProbeGap, 20*time.Millisecond)
	def(&c.HolderPrepare, 100*time.Millisecond)
	def(&c.FailoverBound, 30*time.Second)
	def(&c.TakeoverBound, 2*c.Lease+10*time.Second)
	def(&c.RecoveryBound, 60*time.Second)
	def(&c.LivenessBound, 2*c.Lease+10*time.Second)
	def(&c.LinearizabilityTimeout, 2*time.Minute)
	if c.SideBulk == 0 {
		c.SideBulk = 3000
		if c.Short {
			c.SideBulk = 1200
		}
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// GlobalCellTiming is the cells' timing in a run with RaftDelay: a cell
// across regions (50–150 ms round trips).
const GlobalCellTiming = "heartbeat=500ms,election=5s,lease=30s,keepalive=10s,grace=2m"

// electionMax is the longest election timeout: 20 Raft ticks, or twice
// the cells' own election timeout.
func (c Config) electionMax() time.Duration {
	if c.electionMS > 0 {
		return 2 * time.Duration(c.electionMS) * time.Millisecond
	}
	return 20 * time.Duration(c.RTTMillisecond) * time.Millisecond
}

// Run starts a five-replica cluster (each replica in its own network
// namespace when the machine allows it), runs the workloads and the seed's
// fault schedule for cfg.Duration, heals, checks liveness, stops, reads
// back, and runs every checker. It returns the report, and an error only if
// the run itself could not be carried out.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.CellTiming != "" {
		if _, err := api.ParseCellTiming(cfg.CellTiming); err != nil {
			return nil, fmt.Errorf("cell timing: %w", err)
		}
	}
	r := newRun(cfg.withDefaults())
	defer r.close()
	if err := r.setUp(ctx); err != nil { // run_setup.go
		return nil, err
	}
	if err := r.startWorkloads(); err != nil { // run_workloads.go
		return nil, err
	}
	r.x = r.newExecutor() // run_faults.go
	steps := r.schedule()
	if err := r.injectFaults(ctx, steps); err != nil {
		return nil, err
	}
	r.heal(ctx)
	r.stopWorkloads()
	rb := r.readBack(ctx) // run_readback.go
	r.checkCell(rb)       // run_validate.go; measures the outages, then:
	r.checkSide(r.readBackSide(rb.snap))
	r.checkHostile(rb)
	r.checkRunning(rb.snap)
	r.figures(rb)
	r.rep.Etcd = r.etcd.figures() // workload_etcd.go
	return r.rep, nil
}

// run is one Run, filled phase by phase.
type run struct {
	cfg     Config
	logf    func(string, ...any)
	h       *check.History
	rep     *Report
	closers []func() // cleanups of the set-up, run last first

	// Set up.
	dir, backupDir, fsyncDir string
	adminToken               string
	nn                       *cluster.Netns // nil without namespaces
	c                        *cluster.Cluster
	proxies                  []*cluster.Proxy
	proxyAddrs               []string
	holderBin, resURL        string
	res                      *Resource
	e                        *env
	wcancel                  context.CancelFunc // ends the workloads
	admin                    *sdk.Client        // the executor's client

	// Workloads.
	waiters        []string // workers liveness waits for
	keys, sideKeys []string // config keys of /demo, of /side
	pr             *prober  // demo's probes
	prSide         *prober  // the moving prefix's (nil until it is set up)
	tw             *takeoverWaiter
	semaphores     map[string]int // checker s's semaphores and their N (workload_semaphore.go)
	etcd           *etcdLoad      // the etcd workload (workload_etcd.go); nil if it did not run

	// Schedule and heal.
	x             *executor
	hs            *hostile // nil with NoHostile
	hostileBefore check.ClusterState
	healAt        time.Duration
}

func newRun(cfg Config) *run {
	return &run{cfg: cfg, logf: cfg.Logf, h: check.NewHistory(),
		rep: &Report{Seed: cfg.Seed, Faults: map[string]int{}, OpsByKind: map[string]int{}}}
}

// onClose registers a cleanup for the end of the run.
func (r *run) onClose(f func()) { r.closers = append(r.closers, f) }

// close runs the cleanups, last registered first.
func (r *run) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}
