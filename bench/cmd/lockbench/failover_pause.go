package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// maxTrials bounds --trials: a pause trial takes a few seconds.
const maxTrials = 200

// failoverPause SIGSTOPs the demo cell's leader trials times while a
// client takes fresh locks, measures from the stop to the next granted
// lock, and resumes the replica before the next trial: a hung leader
// (GC, a stalled disk, a frozen VM), which unlike a kill can be repeated
// on the same cluster, so the run gives the tail, not two samples. Each
// trial also records how many elections the cell needed (the term's
// rise: more than one is a split or lost vote, the fail-over's tail).
func failoverPause(ctx context.Context, e *env, procs []int, trials int) ([]report.Result, error) {
	if len(procs) != len(e.endpoints) {
		return nil, errors.New("failover needs --start: it stops the leader by PID")
	}
	c, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rec := stats.NewRecorder(time.Now())
	extra := map[string]float64{}
	start := time.Now()
	over3 := 0
	for trial := 1; trial <= trials; trial++ {
		t, err := pauseTrial(ctx, e, c, procs, trial)
		if err != nil {
			return nil, err
		}
		rec.Add(t.granted, time.Now())
		extra[fmt.Sprintf("trial%d_election_ms", trial)] = float64(t.elected.Milliseconds())
		extra[fmt.Sprintf("trial%d_granted_ms", trial)] = float64(t.granted.Milliseconds())
		extra[fmt.Sprintf("trial%d_elections", trial)] = float64(t.elections)
		if t.granted > 3*time.Second {
			over3++
		}
		e.progress("trial %d: leader %d paused, elected %v, granted %v, %d election(s)",
			trial, t.leader+1, t.elected.Round(time.Millisecond), t.granted.Round(time.Millisecond), t.elections)
	}
	extra["granted_over_3s"] = float64(over3)
	return []report.Result{{Scenario: "failover", Case: fmt.Sprintf("leader SIGSTOP → next lock granted, %d trials", trials),
		Params:  map[string]string{"trials": strconv.Itoa(trials), "fault": "pause", "lease": e.lease.String()},
		Summary: rec.Summarise(time.Since(start)), Extra: extra}}, nil
}

// pauseResult is one pause trial: the paused replica's index, the times
// from the stop to a new leader and to the next grant, and the elections.
type pauseResult struct {
	leader           int
	elected, granted time.Duration
	elections        uint64
}

// pauseTrial runs one trial of failoverPause; the paused replica is
// resumed and the cell settled before it returns, also on an error.
func pauseTrial(ctx context.Context, e *env, c *sdk.Client, procs []int, trial int) (pauseResult, error) {
	leader, before, err := currentLeader(ctx, e.endpoints, "demo")
	if err != nil {
		return pauseResult{}, err
	}
	m := c.NewMutex(fmt.Sprintf("/demo/lockbench/%s/pause-warm-%d", e.run, trial))
	if err := m.Lock(ctx); err != nil {
		return pauseResult{}, err
	}
	_ = m.Unlock(ctx)
	stopped := time.Now()
	if err := syscall.Kill(procs[leader], syscall.SIGSTOP); err != nil {
		return pauseResult{}, fmt.Errorf("stop replica %d (pid %d): %w", leader+1, procs[leader], err)
	}
	defer func() { _ = syscall.Kill(procs[leader], syscall.SIGCONT) }()
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	others := append(e.endpoints[:leader:leader], e.endpoints[leader+1:]...)
	elected := make(chan time.Duration, 1)
	go func() { elected <- untilLeader(lctx, others, "demo", stopped) }()
	m = c.NewMutex(fmt.Sprintf("/demo/lockbench/%s/pause-%d", e.run, trial))
	err = m.Lock(lctx)
	r := pauseResult{leader: leader, granted: time.Since(stopped), elected: <-elected}
	if err != nil {
		return r, fmt.Errorf("no lock within a minute of the leader's stop: %w", err)
	}
	_ = m.Unlock(ctx)
	if nl, err := leaderIndex(ctx, others, "demo"); err == nil {
		if after, err := replicaStatus(ctx, others[nl], "demo", 5*time.Second); err == nil && after.Term > before.Term {
			r.elections = after.Term - before.Term
		}
	}
	_ = syscall.Kill(procs[leader], syscall.SIGCONT)
	return r, settle(ctx, e.endpoints, "demo")
}

// currentLeader is the index of cell's leader and its own status, which
// must say it leads (leader balancing may have moved the leadership since
// another replica named it).
func currentLeader(ctx context.Context, endpoints []string, cell string) (int, api.ReplicaStatus, error) {
	for range 20 {
		leader, err := leaderIndex(ctx, endpoints, cell)
		if err != nil {
			return 0, api.ReplicaStatus{}, err
		}
		st, err := replicaStatus(ctx, endpoints[leader], cell, 5*time.Second)
		if err == nil && st.Role == "leader" {
			return leader, st, nil
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return 0, api.ReplicaStatus{}, err
		}
	}
	return 0, api.ReplicaStatus{}, fmt.Errorf("no replica of %s says it leads", cell)
}

// settle waits (at most 30 s) until every replica of cell names the same
// leader at the same term: the resumed replica has stepped down and
// caught up, so the next trial starts from a quiet cell.
func settle(ctx context.Context, endpoints []string, cell string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if agreed(ctx, endpoints, cell) {
			// Leader balancing may hand the leadership back a moment later.
			return sleepCtx(ctx, 2*time.Second)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("cell %s did not settle within 30 s of the resume", cell)
}

// agreed says whether every replica of cell reports one leader and term.
func agreed(ctx context.Context, endpoints []string, cell string) bool {
	var leader, term uint64
	for i, ep := range endpoints {
		cs, err := replicaStatus(ctx, ep, cell, time.Second)
		if err != nil || cs.LeaderID == 0 || i > 0 && (cs.LeaderID != leader || cs.Term != term) {
			return false
		}
		leader, term = cs.LeaderID, cs.Term
	}
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
