package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// faultsLockd builds lockd with -tags lockd_faults (and lockd_mutants, when
// LOCKD_MUTANT selects one: cluster.MutantFlags) for the cluster unless TESTCLUSTER_LOCKD_BIN already names a binary,
// and points every lockd's fsync fault control at dir/fsync (the
// environment the lockds inherit). It returns the control directory and a
// function putting the environment back.
func faultsLockd(dir string) (string, func(), error) {
	fsyncDir := filepath.Join(dir, "fsync")
	if err := os.MkdirAll(fsyncDir, 0o755); err != nil {
		return "", nil, err
	}
	saved := map[string]*string{}
	set := func(k, v string) {
		if old, ok := os.LookupEnv(k); ok {
			saved[k] = &old
		} else {
			saved[k] = nil
		}
		os.Setenv(k, v)
	}
	restore := func() {
		for k, v := range saved {
			if v == nil {
				os.Unsetenv(k)
			} else {
				os.Setenv(k, *v)
			}
		}
	}
	set(FsyncControlEnv, filepath.Join(fsyncDir, "fsync-{id}"))
	if os.Getenv("TESTCLUSTER_LOCKD_BIN") == "" {
		tags := "lockd_faults"
		if mutant.Any() {
			tags += ",lockd_mutants"
		}
		flags := []string{"-tags", tags}
		if os.Getenv("TESTCLUSTER_RACE") == "1" {
			flags = append(flags, "-race")
		}
		bin, err := cluster.BuildBinary(cluster.LockdPkg, flags...)
		if err != nil {
			restore()
			return "", nil, fmt.Errorf("lockd with -tags %s: %w", tags, err)
		}
		set("TESTCLUSTER_LOCKD_BIN", bin)
	}
	return fsyncDir, restore, nil
}

// fsyncStatus says whether the cluster's lockds obey the fsync control
// (their log says so at start); if not, the disk nemeses are skipped.
func fsyncStatus(c *cluster.Cluster, fsyncDir *string) string {
	for _, id := range c.IDs() {
		if strings.Contains(c.LogTail(id, 5000), "lockd_faults: fsync faults follow") {
			return "injected through the lockd_faults build (" + FsyncControlEnv + ", server/lockd/faults_on.go)"
		}
	}
	*fsyncDir = ""
	return "not available: the lockd binary is not a lockd_faults build (TESTCLUSTER_LOCKD_BIN)"
}

// startSide seeds /side and starts its workloads: two config workers
// reading from their caches, a writer of unique keys, and the serve
// sampler over every cell. It returns the config keys.
func (e *env) startSide(c *cluster.Cluster, admin *sdk.Client) ([]string, error) {
	ctx, cancel := e.callCtx()
	_, err := admin.Put(ctx, sideCfgBase, nil, sdk.MakeParents())
	cancel()
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", sideCfgBase, err)
	}
	if err := e.seedBulk(admin, e.cfg.SideBulk); err != nil {
		return nil, err
	}
	keys := []string{sideCfgBase + "/k0", sideCfgBase + "/k1"}
	for k := 0; k < 2; k++ {
		name := fmt.Sprintf("side-config%d", k)
		e.goWorker(func() { e.sideConfigWorker(k, name, keys) })
	}
	e.goWorker(func() { e.sideWriter("side-acked") })
	period := 250 * time.Millisecond
	if e.cfg.Short {
		period = 100 * time.Millisecond
	}
	e.goWorker(func() { e.serveSampler(c, []string{sidePrefix, "/demo"}, period) })
	return keys, nil
}

// finalSideReads reads back every write under /side and each side config
// key (recorded as gets for the linearizability checker).
func (e *env) finalSideReads(c *cluster.Cluster, _ check.Snapshot, keys []string) (map[string]string, map[string]bool, []check.ConfigOp) {
	ms := e.h.MoveSnapshot()
	acked := make([]check.AckedWrite, 0, len(ms.Writes))
	for _, w := range ms.Writes {
		acked = append(acked, check.AckedWrite{Key: w.Key, Value: w.Value})
	}
	final, unread, ops, err := finalReads(c.Endpoints(), e.adminToken, acked, keys, e.h, e.cfg.RecoveryBound)
	if err != nil {
		e.h.AddViolation("liveness", fmt.Sprintf("final reads of %s after the heal: %v", sidePrefix, err))
	}
	for i := range ops {
		ops[i].Client = 1001
	}
	return final, unread, ops
}

// checkSide runs the move, restore and session checkers (m1–m4) and the
// linearizability checker on the moving prefix's config history, cut into
// eras at each restore of its cell.
func (e *env) checkSide(rep *Report, final map[string]string, unread map[string]bool, finalOps []check.ConfigOp) {
	ms := e.h.MoveSnapshot()
	margin := sdk.DriftMargin(e.cfg.Lease)
	rep.check("m1. at most one cell serves a prefix (sampled)")(check.CheckSingleServer(ms.Serves))
	rep.check("m2. acked values survive moves; a restore loses exactly the writes after its backup")(check.CheckPrefixWrites(ms.Writes, ms.Restores, final, unread))
	rep.check("m3. no SessionSafe after the expiry committed")(check.CheckSessionSafe(ms.Claims, ms.Ends, restoreWindows(ms.Restores, e.cfg.Lease), margin))
	rep.check("m4. no grant on the new cell while the old lease may run")(check.CheckMovedHolds(ms.Holds, margin))
	lin := check.CheckLinearizable(check.SplitRestoreEras(append(ms.Side, finalOps...), ms.Restores), e.cfg.LinearizabilityTimeout)
	rep.check("c'. linearizable cached config on "+sidePrefix+" (moves, restores, timed-out writes)")(lin.Ops, lin.Violations)
	rep.MoveOutcomes = ms.Outcomes
	cached := 0
	for _, o := range ms.Side {
		if o.Kind == check.ConfigGet {
			cached++
		}
	}
	rep.Side = map[string]int{"serve samples": len(ms.Serves), "writes": len(ms.Writes), "config ops": len(ms.Side), "config gets": cached,
		"lease claims": len(ms.Claims), "sessions ended": len(ms.Ends), "holds through a move": len(ms.Holds), "restores": len(ms.Restores)}
}
