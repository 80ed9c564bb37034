package chaos

import (
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"
)

// The workloads phase of Run: every worker started, each recording into
// the history until the workloads' context ends (stopWorkloads).

// startWorkloads starts the lock, election, config, churn, acked-write,
// observer, probe and takeover workers on /demo, then seeds /side and
// starts its workers.
func (r *run) startWorkloads() error {
	e, cfg := r.e, r.cfg
	lockPaths := r.startLockWorkers()
	e.goWorker(func() { e.guardWorkload(cfg.Guarders) }) // workload_guard.go
	r.semaphores = r.startSemaphoreWorkers()
	for k := 0; k < cfg.Candidates; k++ {
		name := fmt.Sprintf("candidate%d", k)
		r.waiters = append(r.waiters, name)
		e.goWorker(func() { e.electionWorker(name) })
	}
	for k := 0; k < cfg.ConfigKeys; k++ {
		r.keys = append(r.keys, fmt.Sprintf("%s/k%d", configBase, k))
	}
	keys := r.keys
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
	etcdLocks := r.startEtcdWorkers() // workload_etcd.go
	observed := append(append(append([]string(nil), lockPaths...), sharedLock, electionPath, takeoverLock), etcdLocks...)
	e.goWorker(func() { e.observer(observed) })
	r.pr = &prober{}
	for k := 0; k < cfg.Probers; k++ {
		name := fmt.Sprintf("probe%d", k)
		e.goWorker(func() { e.probeWorker(r.pr, name, probeBase) })
	}
	r.tw = newTakeoverWaiter()
	r.waiters = append(r.waiters, r.tw.name)
	e.goWorker(func() { e.runTakeoverWaiter(r.tw) })
	var err error
	if r.sideKeys, err = e.startSide(r.c, r.admin); err != nil {
		return err
	}
	// The moving prefix's own probes: its cell is another than demo's
	// most of the run (a fresh cell of three replicas loses its majority
	// to a fault demo's five ride out), and its outages are its own.
	r.prSide = &prober{}
	for k := 0; k < cfg.Probers; k++ {
		name := fmt.Sprintf("side-probe%d", k)
		e.goWorker(func() { e.probeWorker(r.prSide, name, sideProbeBase) })
	}
	return nil
}

// startLockWorkers starts the exclusive lock workers, the shared readers
// and the writer of the shared lock; it returns the exclusive locks.
func (r *run) startLockWorkers() (lockPaths []string) {
	e, cfg := r.e, r.cfg
	for l := 0; l < cfg.Locks; l++ {
		path := fmt.Sprintf("%s/l%d", lockBase, l)
		lockPaths = append(lockPaths, path)
		for w := 0; w < cfg.WorkersPerLock; w++ {
			name := fmt.Sprintf("lock%d-w%d", l, w)
			r.waiters = append(r.waiters, name)
			e.goWorker(func() { e.lockWorker(name, path, api.LockExclusive) })
		}
	}
	for k := 0; k < cfg.SharedReaders; k++ {
		name := fmt.Sprintf("rw-reader%d", k)
		r.waiters = append(r.waiters, name)
		e.goWorker(func() { e.lockWorker(name, sharedLock, api.LockShared) })
	}
	r.waiters = append(r.waiters, "rw-writer")
	e.goWorker(func() { e.lockWorker("rw-writer", sharedLock, api.LockExclusive) })
	return lockPaths
}

// stopWorkloads cancels the workloads, then closes every client, which
// ends the sessions the monitors follow; it waits for the workers (at
// most 2 minutes) and kills the holder process.
func (r *run) stopWorkloads() {
	r.wcancel()
	r.e.closeClients()
	stopped := make(chan struct{})
	go func() { r.e.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Minute):
		r.logf("chaos: workers did not stop within 2m")
	}
	r.x.killHolder()
}
