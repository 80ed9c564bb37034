package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// failover kill -9s the demo cell's leader (trials times; two at most, so a
// majority of five is left) while a client keeps taking fresh locks, and
// measures from the kill to the next granted lock: what a service waiting
// on the cell sees. It needs --start (it kills replicas by PID).
func failover(ctx context.Context, e *env, procs []int, trials int) ([]report.Result, error) {
	if len(procs) != len(e.endpoints) {
		return nil, errors.New("failover needs --start: it kills the leader by PID")
	}
	trials = min(trials, (len(procs)-1)/2)
	c, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rec := stats.NewRecorder(time.Now())
	extra := map[string]float64{}
	start := time.Now()
	for trial := 0; trial < trials; trial++ {
		leader, err := leaderIndex(ctx, e.endpoints, "demo")
		if err != nil {
			return nil, err
		}
		// One lock first, so the session and the leader are warm.
		m := c.NewMutex(fmt.Sprintf("/demo/lockbench/%s/failover-warm-%d", e.run, trial))
		if err := m.Lock(ctx); err != nil {
			return nil, err
		}
		_ = m.Unlock(ctx)
		killed := time.Now()
		if err := syscall.Kill(procs[leader], syscall.SIGKILL); err != nil {
			return nil, fmt.Errorf("kill replica %d (pid %d): %w", leader+1, procs[leader], err)
		}
		e.progress("trial %d: killed replica %d, the leader", trial+1, leader+1)
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		survivors := append(e.endpoints[:leader:leader], e.endpoints[leader+1:]...)
		elected := make(chan time.Duration, 1)
		go func() { elected <- untilLeader(lctx, survivors, "demo", killed) }()
		m = c.NewMutex(fmt.Sprintf("/demo/lockbench/%s/failover-%d", e.run, trial))
		err = m.Lock(lctx)
		took := time.Since(killed)
		// Where the time went: the election, then the client finding the
		// new leader and committing its create.
		election := <-elected
		cancel()
		if err != nil {
			return nil, fmt.Errorf("no lock within a minute of the leader's kill: %w", err)
		}
		rec.Add(took, time.Now())
		extra[fmt.Sprintf("trial%d_election_ms", trial+1)] = float64(election.Milliseconds())
		extra[fmt.Sprintf("trial%d_granted_ms", trial+1)] = float64(took.Milliseconds())
		_ = m.Unlock(ctx)
		e.endpoints = append(e.endpoints[:leader:leader], e.endpoints[leader+1:]...)
		procs = append(procs[:leader:leader], procs[leader+1:]...)
	}
	return []report.Result{{Scenario: "failover", Case: fmt.Sprintf("leader kill -9 → next lock granted, %d trials", trials),
		Params: map[string]string{"trials": strconv.Itoa(trials), "lease": e.lease.String()}, Summary: rec.Summarise(time.Since(start)), Extra: extra}}, nil
}

// untilLeader polls endpoints every 10 ms until one reports that it leads
// cell, and returns the time since since (or since ctx's end, if none does).
func untilLeader(ctx context.Context, endpoints []string, cell string, since time.Time) time.Duration {
	for ctx.Err() == nil {
		for _, ep := range endpoints {
			if cs, err := replicaStatus(ctx, ep, cell, time.Second); err == nil && cs.Role == "leader" {
				return time.Since(since)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return time.Since(since)
}

// leaderIndex is the index in endpoints of the replica leading cell, as
// the first replica that answers says.
func leaderIndex(ctx context.Context, endpoints []string, cell string) (int, error) {
	for attempt := 0; attempt < 100; attempt++ {
		for _, ep := range endpoints {
			cs, err := replicaStatus(ctx, ep, cell, 5*time.Second)
			if err != nil || cs.LeaderAPI == "" {
				continue
			}
			if i := slices.Index(endpoints, cs.LeaderAPI); i >= 0 {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("no leader of %s known", cell)
}

// replicaStatus is what the lockd at ep reports of its replica of cell:
// one status probe, bounded by timeout.
func replicaStatus(ctx context.Context, ep, cell string, timeout time.Duration) (api.ReplicaStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := sdk.FetchStatus(ctx, ep, sdk.Access{})
	if err != nil {
		return api.ReplicaStatus{}, err
	}
	for _, cs := range st.Cells {
		if cs.Cell == cell {
			return cs, nil
		}
	}
	return api.ReplicaStatus{}, fmt.Errorf("%s hosts no cell %s", ep, cell)
}
