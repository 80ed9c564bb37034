package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// The validate phase of Run: every checker over the history and what was
// read back, in the report's order, then the report's figures.

// checkCell runs the checkers of the demo cell's workloads (a–e, no
// commit without a majority) and measures the outages the session checker
// excuses.
func (r *run) checkCell(rb readBack) {
	rep, cfg, snap := r.rep, r.cfg, rb.snap
	rep.check("a. mutual exclusion (service indices)")(check.CheckMutualExclusion(snap.LockObs, snap.Deletions))
	rep.check("a. mutual exclusion (client intervals)")(check.CheckIntervals(snap.Intervals, sdk.DriftMargin(cfg.Lease)))
	rep.check("b. fencing (resource)")(check.CheckFencing(snap.Writes, snap.Grants, snap.LockObs))
	rep.check("s. semaphore: at most N holders, tokens rising")(check.CheckSemaphores(snap.Intervals, r.h.PermitGrants(), r.semaphores, sdk.DriftMargin(cfg.Lease)))
	lin := check.CheckLinearizable(append(snap.Config, rb.finalOps...), cfg.LinearizabilityTimeout)
	rep.Linearizable = string(lin.Result)
	rep.check("c. linearizable config (porcupine)")(lin.Ops, lin.Violations)
	rep.check("d. acknowledged writes kept")(check.CheckAcked(snap.Acked, rb.final, rb.unread))
	outages := r.pr.outages(cfg.Lease, r.h.Now())
	sessionVs, excused := check.CheckSessions(snap.Losses, outages, cfg.Lease, cfg.Grace)
	rep.check("d. no session lost to a fail-over")(len(r.waiters)+cfg.ConfigClients+cfg.AckedWriters, sessionVs)
	rep.SessionsLostToOutages = len(excused)
	rep.SessionsLost = len(sessionVs)
	rep.Outages = describeOutages(outages)
	// The windows are the demo cell's: the moving prefix's ops (side-*)
	// may be served by a cell placed elsewhere (move-new-cell, restore-old),
	// whose majority a kill of demo's need not take.
	rep.check("no commit without a majority")(check.CheckNoQuorum(demoOps(snap.Ops), snap.NoQuorum))
	rep.check("e. liveness after heal")(check.CheckLiveness(snap.WaiterGrant, r.waiters, r.healAt, cfg.LivenessBound))
}

// describeOutages is each outage as "start–end (length)".
func describeOutages(outages []check.Window) []string {
	out := make([]string, 0, len(outages))
	for _, o := range outages {
		out = append(out, fmt.Sprintf("%v–%v (%v)", o.Start.Round(time.Second), o.End.Round(time.Second), (o.End-o.Start).Round(time.Second)))
	}
	return out
}

// checkSide runs the side prefix's checkers on what it read back.
func (r *run) checkSide(side sideReadBack) {
	r.e.checkSide(r.rep, side.final, side.unread, side.ops)
}

// checkHostile runs checker h2 (nothing outside the hostile tenant's
// grants changed) and the hostile tenant's figures, if it ran.
func (r *run) checkHostile(rb readBack) {
	if r.hs == nil {
		return
	}
	before := r.hostileBefore
	// The cells move-new-cell created are the executor's, not mallory's.
	for i := 1; i <= r.x.fresh; i++ {
		before.Cells = append(before.Cells, freshCellName(i))
	}
	r.rep.check("h2. hostile: nothing outside its grants changed")(check.CheckHostileState(before, rb.hostileAfter))
	outages := r.pr.outages(stallOutageGap, r.h.Now())
	sideOutages := outages
	if r.prSide != nil {
		// Only within a fault: a stall of every writer of the moving
		// prefix, its probes too, outside any fault is a stall, not an
		// outage (a seal that never ends, an SDK lost after a move).
		all := r.prSide.outages(stallOutageGap, r.h.Now())
		sideOutages = check.Within(all, r.x.faultWindows())
		r.rep.SideOutages = describeOutages(all)
	}
	r.rep.hostileFigures(r.e, r.hs, rb.snap.Ops, cellOutages{demo: outages, side: sideOutages}, r.x.fenceWindows(),
		restoreWindows(r.e.h.MoveSnapshot().Restores, r.cfg.Lease))
}

// checkRunning reports the checks made while the run went on, in the
// order of runningChecks, then any other checker's violations by name.
func (r *run) checkRunning(snap check.Snapshot) {
	byChecker := map[string][]check.Violation{}
	for _, v := range snap.Violations {
		byChecker[v.Checker] = append(byChecker[v.Checker], v)
	}
	for _, row := range runningChecks {
		r.rep.check(row.title)(snap.Checked[row.key], byChecker[row.key])
		delete(byChecker, row.key)
	}
	for _, k := range slices.Sorted(maps.Keys(byChecker)) {
		r.rep.check("during the run: "+k)(snap.Checked[k], byChecker[k])
	}
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
	{"guarded-write", "g. guarded writes: tokens rise in commit order, none after its release"}, // workload_guard.go
}

// figures fills the report's counts and samples, and finishes it.
func (r *run) figures(rb readBack) {
	rep, snap, n := r.rep, rb.snap, r.x
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
	rep.ConfigOps, rep.AckedWrites = len(snap.Config)+len(rb.finalOps), len(snap.Acked)
	rep.StaleRefused, rep.Jeopardies = snap.StaleWrites, snap.Jeopardies
	rep.ConfigCacheHits, rep.ConfigCacheMisses = r.e.configCache.hits.Load(), r.e.configCache.misses.Load()
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
		r.logf("chaos: %d violations; data and logs kept in %s", rep.Violations, r.dir)
	}
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
