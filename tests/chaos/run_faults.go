package chaos

import (
	"context"
	"time"

	"github.com/lockservice/lockd/tests/chaos/check"
)

// The schedule and heal phases of Run: the seed's fault schedule run by
// the executor (with the hostile tenant while the faults last), then
// every fault healed and every waiter granted within the liveness bound.

// scheduleFor is the fault schedule of a run: the seed's, cfg.Rounds
// rounds or as many as the fault phase may hold (one per 10 s, at most
// 1000), scaled by the cells' timing; partitions only with network
// namespaces. cfg has its defaults. Pure: SEED= reproduces it.
func scheduleFor(cfg Config, partitions bool) []Step {
	rounds := cfg.Rounds
	if rounds <= 0 {
		rounds = min(1000, int(cfg.Duration/(10*time.Second))+1)
	}
	return Schedule(cfg.Seed, cfg.timing(), partitions, rounds)
}

// timing is what scales the schedule: the longest election, the lease.
func (c Config) timing() Timing {
	return Timing{Election: c.electionMax(), Lease: c.Lease}
}

// newExecutor is the executor of the run's schedule, once the disk
// nemeses know whether lockd obeys the fsync control.
func (r *run) newExecutor() *executor {
	r.rep.FsyncFaults = fsyncStatus(r.c, &r.fsyncDir)
	return &executor{e: r.e, c: r.c, nn: r.nn, prober: r.pr, tw: r.tw, admin: r.admin, logf: r.logf,
		holderBin: r.holderBin, resourceURL: r.resURL, logDir: r.dir, counts: map[string]int{}, proxies: r.proxies,
		down: map[int]bool{}, crashed: map[int]string{}, bulk: r.cfg.SideBulk, backupDir: r.backupDir, fsyncDir: r.fsyncDir}
}

// schedule is the run's fault schedule, recorded in the report.
func (r *run) schedule() []Step {
	steps := scheduleFor(r.cfg, r.nn != nil)
	r.rep.Schedule = steps
	timing := r.cfg.timing()
	r.logf("chaos: seed %d, %d steps scheduled (election ≤ %v, lease %v), fault phase %v", r.cfg.Seed, len(steps), timing.Election, r.cfg.Lease, r.cfg.Duration)
	return steps
}

// injectFaults starts the hostile tenant, lets the workloads warm up, then
// runs the steps for cfg.Duration with the hostile tenant attacking while
// they last. It returns ctx's error if the run was cancelled.
func (r *run) injectFaults(ctx context.Context, steps []Step) error {
	if !r.cfg.NoHostile {
		hs, before, err := startHostile(r.e, r.admin, r.c.Endpoints(), r.proxyAddrs, r.keys)
		if err != nil {
			return err
		}
		r.hs, r.hostileBefore = hs, before
	}
	sleepCtx(ctx, 2*r.cfg.timing().Election)
	faultStart := time.Now()
	end := faultStart.Add(r.cfg.Duration)
	hctx, hcancel := context.WithCancel(r.e.ctx)
	hdone := make(chan struct{})
	go func() {
		defer close(hdone)
		if r.hs != nil {
			r.hs.run(hctx, end, r.cfg.HostileRate)
		}
	}()
	r.x.run(ctx, steps, end)
	hcancel()
	<-hdone
	r.rep.DurationS = time.Since(faultStart).Seconds()
	if ctx.Err() != nil {
		r.x.killHolder()
		return ctx.Err()
	}
	return nil
}

// heal heals every fault, then checks liveness: the holder process lets
// go and every waiter must be granted within cfg.LivenessBound.
func (r *run) heal(ctx context.Context) {
	if err := r.x.ensureHealthy(ctx); err != nil {
		r.x.violation("liveness", "final heal: %v", err)
	}
	r.healAt = r.h.Now()
	r.x.stopHolder()
	r.logf("chaos: faults stopped at %v; waiting for every waiter (bound %v)", r.healAt.Round(time.Millisecond), r.cfg.LivenessBound)
	deadline := time.Now().Add(r.cfg.LivenessBound)
	for i := 0; i < 1_000_000 && time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		snap := r.h.Snapshot()
		if _, vs := check.CheckLiveness(snap.WaiterGrant, r.waiters, r.healAt, r.cfg.LivenessBound); len(vs) == 0 {
			break
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	r.rep.HealedS = (r.h.Now() - r.healAt).Seconds()
}
