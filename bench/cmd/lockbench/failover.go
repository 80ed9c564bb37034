package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
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
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	for ctx.Err() == nil {
		for _, ep := range endpoints {
			req, err := http.NewRequestWithContext(ctx, "GET", "http://"+ep+api.RouteStatus, nil)
			if err != nil {
				return time.Since(since)
			}
			resp, err := hc.Do(req)
			if err != nil {
				continue
			}
			var st api.StatusResponse
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err != nil {
				continue
			}
			for _, cs := range st.Cells {
				if cs.Cell == cell && cs.Role == "leader" {
					return time.Since(since)
				}
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
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	for attempt := 0; attempt < 100; attempt++ {
		for _, ep := range endpoints {
			req, err := http.NewRequestWithContext(ctx, "GET", "http://"+ep+api.RouteStatus, nil)
			if err != nil {
				return 0, err
			}
			resp, err := hc.Do(req)
			if err != nil {
				continue
			}
			var st api.StatusResponse
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err != nil {
				continue
			}
			for _, cs := range st.Cells {
				if cs.Cell != cell || cs.LeaderAPI == "" {
					continue
				}
				for i, e := range endpoints {
					if e == cs.LeaderAPI {
						return i, nil
					}
				}
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
