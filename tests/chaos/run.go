package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	// LockdTags are build tags added to the suite's lockd build (always
	// built with lockd_faults, for the disk nemeses), e.g. a mutant's
	// lockd_broken_X. Ignored if TESTCLUSTER_LOCKD_BIN names a binary.
	LockdTags string
	// SideBulk is how many nodes are put under /side before the faults,
	// so that a copy takes several pages (default 1200 short, else 3000).
	SideBulk int

	Locks, WorkersPerLock, SharedReaders, Candidates           int
	ConfigClients, ConfigKeys, Churners, AckedWriters, Probers int

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
	}
	def(&c.Grace, api.DefaultGrace)
	defi(&c.ConfigKeys, 2)
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
	cfg = cfg.withDefaults()
	logf := cfg.Logf
	h := check.NewHistory()
	rep := &Report{Seed: cfg.Seed, Faults: map[string]int{}, OpsByKind: map[string]int{}}

	dir, keep := cfg.Dir, cfg.Dir != ""
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "chaos-"); err != nil {
			return nil, err
		}
	}
	rep.Dir = dir
	defer func() {
		if !keep && rep.Violations == 0 {
			_ = os.RemoveAll(dir)
			rep.Dir = ""
		}
	}()

	cluster.SweepNetns(logf)
	var nn *cluster.Netns
	noPart := cfg.NoPartitions || os.Getenv("CHAOS_NO_PARTITIONS") == "1"
	if noPart {
		rep.Network = "loopback (partition nemeses skipped: -no-partitions or CHAOS_NO_PARTITIONS=1)"
	} else if n, err := cluster.NewNetns(5, logf); err != nil {
		return nil, fmt.Errorf("network namespaces unavailable, so the partition nemeses cannot run (set CHAOS_NO_PARTITIONS=1 to run without them): %w", err)
	} else {
		nn = n
		rep.Network = fmt.Sprintf("one network namespace per replica, bridge %s, partitions by blackhole routes", n.Bridge())
		defer func() {
			if err := nn.Close(); err != nil {
				logf("chaos: netns cleanup: %v", err)
			}
		}()
	}

	// Tokens are required: the workloads are a tenant, the executor and
	// the proxies the admin.
	adminToken := newAdminToken()
	opts := cluster.Options{
		AdminToken:     adminToken,
		Replicas:       5,
		RTTMillisecond: cfg.RTTMillisecond,
		Lease:          cfg.Lease,
		// side is the other cell the move-prefix nemesis moves /side to
		// and from.
		Cells: []cluster.CellSpec{{Name: cellName, ShardID: 1, Prefixes: []string{"/demo"}, Timing: cfg.CellTiming},
			{Name: sideCell, ShardID: 2, Prefixes: []string{sidePrefix}, Timing: cfg.CellTiming}},
		RaftDelay:     cfg.RaftDelay,
		Dir:           filepath.Join(dir, "cluster"),
		StartTimeout:  2 * time.Minute,
		LeaderTimeout: 30 * time.Second,
		Logf:          logf,
	}
	if nn != nil {
		opts.Network = nn
	}
	if cfg.RaftDelay.Max > 0 {
		rep.Network += fmt.Sprintf("; Raft through relays adding %v to %v each way; cells' timing %s", cfg.RaftDelay.Min, cfg.RaftDelay.Max, cfg.CellTiming)
	}
	if cfg.SnapshotEntries > 0 {
		opts.ExtraArgs = append(opts.ExtraArgs, "--snapshot-entries", fmt.Sprint(cfg.SnapshotEntries))
	}
	backupDir := filepath.Join(dir, "backups")
	opts.ExtraArgs = append(opts.ExtraArgs, "--backup-dir", backupDir)
	fsyncDir, restoreEnv, err := faultsLockd(cfg, dir)
	if err != nil {
		return nil, err
	}
	defer restoreEnv()
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	c, err := cluster.New(opts)
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		if c != nil {
			logf("%s", c.LogTails(30))
		}
		return nil, fmt.Errorf("cluster: %w", err)
	}
	holderBin, err := holderBinary()
	if err != nil {
		return nil, err
	}
	var proxies []*cluster.Proxy
	var proxyAddrs []string
	if !cfg.NoProxies {
		for i := 1; i <= 2; i++ {
			p, err := c.StartProxy(fmt.Sprintf("proxy-%d", i))
			if err != nil {
				return nil, fmt.Errorf("proxy: %w", err)
			}
			proxies = append(proxies, p)
			proxyAddrs = append(proxyAddrs, p.Addr)
		}
		rep.Proxies = len(proxies)
	}
	res := NewResource(h)
	resURL, stopRes, err := res.Serve()
	if err != nil {
		return nil, err
	}
	defer stopRes()

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	e := &env{h: h, res: res, cfg: cfg, endpoints: c.Endpoints(), ctx: wctx, logf: logf, proxies: len(proxies) > 0, adminToken: adminToken}
	defer e.closeClients()
	admin, err := e.newClient("admin", false, 0)
	if err != nil {
		return nil, err
	}
	{
		tctx, tcancel := e.callCtx()
		e.tenantToken, err = putTenant(tctx, admin, workloadTenant, workloadGrant, sideGrant)
		tcancel()
		if err != nil {
			return nil, err
		}
	}
	e.epoch = 1
	if pi, ok := admin.Directory().Prefix("/demo"); ok {
		e.epoch = pi.Epoch
	}
	// The config keys' parent, so that the keys themselves start absent
	// and a create of one can only fail because it exists.
	{
		pctx, pcancel := e.callCtx()
		_, err := admin.Put(pctx, configBase, nil, sdk.MakeParents())
		pcancel()
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", configBase, err)
		}
	}

	// Workloads.
	var waiters, lockPaths []string
	for l := 0; l < cfg.Locks; l++ {
		path := fmt.Sprintf("%s/l%d", lockBase, l)
		lockPaths = append(lockPaths, path)
		for w := 0; w < cfg.WorkersPerLock; w++ {
			name := fmt.Sprintf("lock%d-w%d", l, w)
			waiters = append(waiters, name)
			e.goWorker(func() { e.lockWorker(name, path, api.LockExclusive) })
		}
	}
	for r := 0; r < cfg.SharedReaders; r++ {
		name := fmt.Sprintf("rw-reader%d", r)
		waiters = append(waiters, name)
		e.goWorker(func() { e.lockWorker(name, sharedLock, api.LockShared) })
	}
	waiters = append(waiters, "rw-writer")
	e.goWorker(func() { e.lockWorker("rw-writer", sharedLock, api.LockExclusive) })
	for k := 0; k < cfg.Candidates; k++ {
		name := fmt.Sprintf("candidate%d", k)
		waiters = append(waiters, name)
		e.goWorker(func() { e.electionWorker(name) })
	}
	var keys []string
	for k := 0; k < cfg.ConfigKeys; k++ {
		keys = append(keys, fmt.Sprintf("%s/k%d", configBase, k))
	}
	for k := 0; k < cfg.ConfigClients; k++ {
		name := fmt.Sprintf("config%d", k)
		e.goWorker(func() { e.configWorker(k, name, keys) })
	}
	for k := 0; k < cfg.Churners; k++ {
		name := fmt.Sprintf("churn%d", k)
		e.goWorker(func() { e.churnWorker(name) })
	}
	for k := 0; k < cfg.AckedWriters; k++ {
		name := fmt.Sprintf("acked%d", k)
		e.goWorker(func() { e.ackedWriter(name) })
	}
	observed := append(append([]string(nil), lockPaths...), sharedLock, electionPath, takeoverLock)
	e.goWorker(func() { e.observer(observed) })
	pr := &prober{}
	for k := 0; k < cfg.Probers; k++ {
		name := fmt.Sprintf("probe%d", k)
		e.goWorker(func() { e.probeWorker(pr, name) })
	}
	tw := newTakeoverWaiter()
	waiters = append(waiters, tw.name)
	e.goWorker(func() { e.runTakeoverWaiter(tw) })
	sideKeys, err := e.startSide(c, admin)
	if err != nil {
		return nil, err
	}
	rep.FsyncFaults = fsyncStatus(c, &fsyncDir)

	n := &nemesis{e: e, c: c, nn: nn, prober: pr, tw: tw, admin: admin, logf: logf,
		holderBin: holderBin, resourceURL: resURL, logDir: dir, counts: map[string]int{}, proxies: proxies,
		down: map[int]bool{}, crashed: map[int]string{}, bulk: cfg.SideBulk, backupDir: backupDir, fsyncDir: fsyncDir}
	rounds := cfg.Rounds
	if rounds <= 0 {
		rounds = min(1000, int(cfg.Duration/(10*time.Second))+1)
	}
	timing := Timing{Election: cfg.electionMax(), Lease: cfg.Lease}
	steps := Schedule(cfg.Seed, timing, nn != nil, rounds)
	rep.Schedule = steps
	logf("chaos: seed %d, %d steps scheduled (election ≤ %v, lease %v), fault phase %v", cfg.Seed, len(steps), timing.Election, cfg.Lease, cfg.Duration)

	var hs *hostile
	var hostileBefore check.ClusterState
	if !cfg.NoHostile {
		if hs, hostileBefore, err = startHostile(e, admin, c.Endpoints(), proxyAddrs, keys); err != nil {
			return nil, err
		}
	}

	// Let the workloads warm up, then the faults, and the hostile tenant
	// while they last.
	sleepCtx(ctx, 2*timing.Election)
	faultStart := time.Now()
	hctx, hcancel := context.WithCancel(wctx)
	hdone := make(chan struct{})
	go func() {
		defer close(hdone)
		if hs != nil {
			hs.run(hctx, faultStart.Add(cfg.Duration), cfg.HostileRate)
		}
	}()
	n.run(ctx, steps, faultStart.Add(cfg.Duration))
	hcancel()
	<-hdone
	rep.DurationS = time.Since(faultStart).Seconds()
	if ctx.Err() != nil {
		n.killHolder()
		return nil, ctx.Err()
	}

	// Heal, then liveness: the holder process lets go and every waiter
	// must be granted within the bound.
	if err := n.ensureHealthy(ctx); err != nil {
		n.violation("liveness", "final heal: %v", err)
	}
	healAt := h.Now()
	n.stopHolder()
	logf("chaos: faults stopped at %v; waiting for every waiter (bound %v)", healAt.Round(time.Millisecond), cfg.LivenessBound)
	deadline := time.Now().Add(cfg.LivenessBound)
	for i := 0; i < 1_000_000 && time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		snap := h.Snapshot()
		if _, vs := check.CheckLiveness(snap.WaiterGrant, waiters, healAt, cfg.LivenessBound); len(vs) == 0 {
			break
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	rep.HealedS = (h.Now() - healAt).Seconds()

	// Stop the workloads: cancel, then close every client, which ends the
	// sessions the monitors follow.
	wcancel()
	e.closeClients()
	stopped := make(chan struct{})
	go func() { e.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Minute):
		logf("chaos: workers did not stop within 2m")
	}
	n.killHolder()

	// Final reads, on a fresh client.
	snap := h.Snapshot()
	final, unread, finalOps, err := finalReads(c.Endpoints(), adminToken, snap.Acked, keys, h, cfg.RecoveryBound)
	if err != nil {
		n.violation("liveness", "final reads after the heal: %v", err)
	}
	var hostileAfter check.ClusterState
	if hs != nil {
		sctx, scancel := context.WithTimeout(ctx, cfg.RecoveryBound)
		hostileAfter, err = clusterState(sctx, c.Endpoints(), adminToken, keys)
		scancel()
		if err != nil {
			h.AddViolation("hostile-state", fmt.Sprintf("the state after the run could not be read: %v", err))
		}
	}
	snap = h.Snapshot()

	// Checkers.
	rep.check("a. mutual exclusion (service indices)")(check.CheckMutualExclusion(snap.LockObs, snap.Deletions))
	rep.check("a. mutual exclusion (client intervals)")(check.CheckIntervals(snap.Intervals, sdk.DriftMargin(cfg.Lease)))
	rep.check("b. fencing (resource)")(check.CheckFencing(snap.Writes, snap.Grants, snap.LockObs))
	lin := check.CheckLinearizable(append(snap.Config, finalOps...), cfg.LinearizabilityTimeout)
	rep.Linearizable = string(lin.Result)
	rep.check("c. linearizable config (porcupine)")(lin.Ops, lin.Violations)
	rep.check("d. acknowledged writes kept")(check.CheckAcked(snap.Acked, final, unread))
	outages := pr.outages(cfg.Lease, h.Now())
	sessionVs, excused := check.CheckSessions(snap.Losses, outages, cfg.Lease, cfg.Grace)
	rep.check("d. no session lost to a fail-over")(len(waiters)+cfg.ConfigClients+cfg.AckedWriters, sessionVs)
	rep.SessionsLostToOutages = len(excused)
	for _, o := range outages {
		rep.Outages = append(rep.Outages, fmt.Sprintf("%v–%v (%v)", o.Start.Round(time.Second), o.End.Round(time.Second), (o.End-o.Start).Round(time.Second)))
	}
	// The windows are the demo cell's: the moving prefix's ops (side-*)
	// may be served by a cell placed elsewhere (move-new-cell, restore-old),
	// whose majority a kill of demo's need not take.
	rep.check("no commit without a majority")(check.CheckNoQuorum(demoOps(snap.Ops), snap.NoQuorum))
	rep.check("e. liveness after heal")(check.CheckLiveness(snap.WaiterGrant, waiters, healAt, cfg.LivenessBound))
	// After the outages are measured: a prefix left unavailable makes
	// these reads wait out their bound.
	sideFinal, sideUnread, sideOps := e.finalSideReads(c, snap, sideKeys)
	e.checkSide(rep, sideFinal, sideUnread, sideOps)
	if hs != nil {
		// The cells move-new-cell created are the executor's, not mallory's.
		for i := 1; i <= n.fresh; i++ {
			hostileBefore.Cells = append(hostileBefore.Cells, freshCellName(i))
		}
		rep.check("h2. hostile: nothing outside its grants changed")(check.CheckHostileState(hostileBefore, hostileAfter))
		rep.hostileFigures(e, hs, snap.Ops, pr.outages(stallOutageGap, h.Now()), n.fenceWindows(),
			restoreWindows(e.h.MoveSnapshot().Restores, e.cfg.Lease))
	}
	byChecker := map[string][]check.Violation{}
	for _, v := range snap.Violations {
		byChecker[v.Checker] = append(byChecker[v.Checker], v)
	}
	for _, row := range runningChecks {
		rep.check(row.title)(snap.Checked[row.key], byChecker[row.key])
		delete(byChecker, row.key)
	}
	for _, k := range slices.Sorted(maps.Keys(byChecker)) {
		rep.check("during the run: "+k)(snap.Checked[k], byChecker[k])
	}

	// Figures.
	rep.Ops = len(snap.Ops)
	for _, o := range snap.Ops {
		rep.OpsByKind[o.Kind]++
	}
	rep.Grants, rep.LockObservations = len(snap.Grants), len(snap.LockObs)
	rep.Intervals, rep.Deletions = len(snap.Intervals), len(snap.Deletions)
	for _, w := range snap.Writes {
		if w.Accepted {
			rep.AcceptedWrites++
		}
	}
	rep.ConfigOps, rep.AckedWrites = len(snap.Config)+len(finalOps), len(snap.Acked)
	rep.StaleRefused, rep.Jeopardies = snap.StaleWrites, snap.Jeopardies
	rep.ConfigCacheHits, rep.ConfigCacheMisses = e.configCache.hits.Load(), e.configCache.misses.Load()
	rep.SessionsLost = len(sessionVs)
	n.mu.Lock()
	rep.Steps = n.steps
	for k, v := range n.counts {
		rep.Faults[k] = v
	}
	rep.failoverSamples = append([]Sample(nil), n.failovers...)
	rep.takeoverSamples = append([]Sample(nil), n.takeovers...)
	rep.regainSamples = append([]Sample(nil), n.regains...)
	n.mu.Unlock()
	rep.finish()
	if rep.Violations > 0 {
		logf("chaos: %d violations; data and logs kept in %s", rep.Violations, dir)
	}
	return rep, nil
}

// runningChecks are the checks made while the run goes on, by the name
// their violations are recorded under.
var runningChecks = []struct{ key, title string }{
	{"grant-confirmed", "a. every grant confirmed by the service"},
	{"election", "election: service's leader = campaigner"},
	{"session-churn", "churn: owner right, gone after close"},
	{"no-majority", "no-majority probe lock not granted"},
	{"liveness", "bounds: fail-over, takeover, recovery"},
	{"hostile-refused", "h1. hostile: nothing outside its grants answered"},
	{"migration", "moves: every move, resume and race settles, nothing lost at once"},
	{"restore", "restores through the product complete"},
	{"single-server", "m1. one cell per prefix (a stale client cannot lock)"},
}

// finalReads reads back every acknowledged key and each config key (the
// latter recorded as config gets for the linearizability checker). Keys it
// could not read are in unread, not in final; they fail the run (checker
// d) as well as the liveness bound.
func finalReads(endpoints []string, adminToken string, acked []check.AckedWrite, keys []string, h *check.History, bound time.Duration) (final map[string]string, unread map[string]bool, ops []check.ConfigOp, err error) {
	final, unread = map[string]string{}, map[string]bool{}
	// Each read is a ReadIndex round: a cross-region round trip on a
	// global cell. Budget one per key beyond the bound, many at once.
	ctx, cancel := context.WithTimeout(context.Background(), bound+time.Duration(len(acked))*20*time.Millisecond)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints, AuthToken: adminToken})
	if err != nil {
		for _, a := range acked {
			unread[a.Key] = true
		}
		return final, unread, nil, err
	}
	defer c.Close()
	var errs []error
	for _, k := range keys {
		op := check.ConfigOp{Client: 1000, Key: k, Kind: check.ConfigGet, Call: h.Now()}
		n, err := c.Get(ctx, k)
		op.Return = h.Now()
		switch {
		case err == nil:
			op.Outcome, op.Exists, op.GotValue, op.Version = check.OutcomeOK, true, string(n.Value), n.Version
		case errors.Is(err, sdk.ErrNoNode):
			op.Outcome = check.OutcomeOK
		default:
			errs = append(errs, fmt.Errorf("get %s: %w", k, err))
			continue
		}
		ops = append(ops, op)
	}
	var (
		mu   sync.Mutex
		jobs = make(chan check.AckedWrite)
		wg   sync.WaitGroup
	)
	for w := 0; w < 64; w++ {
		wg.Go(func() {
			for a := range jobs {
				var (
					n   api.Node
					err = ctx.Err()
				)
				if err == nil {
					n, err = c.Get(ctx, a.Key)
				}
				mu.Lock()
				switch {
				case err == nil:
					final[a.Key] = string(n.Value)
				case errors.Is(err, sdk.ErrNoNode):
				default:
					unread[a.Key] = true
					if len(errs) < 5 {
						errs = append(errs, fmt.Errorf("get %s: %w", a.Key, err))
					}
				}
				mu.Unlock()
			}
		})
	}
	for _, a := range acked {
		jobs <- a
	}
	close(jobs)
	wg.Wait()
	if len(unread) > 0 {
		errs = append(errs, fmt.Errorf("%d acknowledged keys could not be read", len(unread)))
	}
	return final, unread, ops, errors.Join(errs...)
}

// demoOps are the ops on the demo cell: all but the moving prefix's
// workers' (side-*).
func demoOps(ops []check.Op) []check.Op {
	out := make([]check.Op, 0, len(ops))
	for _, o := range ops {
		if !strings.HasPrefix(o.Worker, "side-") {
			out = append(out, o)
		}
	}
	return out
}
