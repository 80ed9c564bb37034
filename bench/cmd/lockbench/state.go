package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// stateSize is the state the scenario builds; the defaults are the spec's
// ("20 k locks, 50 k ephemeral members, 30 k config values of ~1 KB").
type stateSize struct {
	locks, members, values, valueBytes int
}

// stateScenario builds the spec's state on the demo cell and measures what
// it costs: RSS per replica, a snapshot's save time and size on every
// replica (saved on request), and, with --start, a restore: one follower is
// killed with SIGKILL and started again on its data, and the time its
// state machine took to load the snapshot and the time until it caught up
// are recorded. The restarted follower runs until lockbench ends.
func stateScenario(ctx context.Context, e *env, sz stateSize, procs []int) ([]report.Result, error) {
	const workers = 64
	cs, closeAll, err := e.clients(ctx, 16)
	if err != nil {
		return nil, err
	}
	// The clients hold the locks and members: they stay open until the
	// measurement ends.
	defer closeAll()
	base := fmt.Sprintf("/demo/lockbench/%s/state", e.run)
	value := bytes.Repeat([]byte("v"), sz.valueBytes)
	member := []byte("host-0000.example:8080")
	total := sz.locks + sz.members + sz.values
	build := stats.NewRecorder(time.Now())
	var next, done atomic.Int64
	var firstErr atomic.Pointer[error]
	start := time.Now()
	stop := e.tick(func() string { return fmt.Sprintf("building: %d/%d nodes", done.Load(), total) })
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(c *sdk.Client) {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total || ctx.Err() != nil || firstErr.Load() != nil {
					return
				}
				t0 := time.Now()
				var err error
				switch {
				case i < sz.locks:
					_, _, err = c.CreateLockNode(ctx, fmt.Sprintf("%s/locks/l%d", base, i), api.LockExclusive, nil)
				case i < sz.locks+sz.members:
					j := i - sz.locks
					_, err = c.Create(ctx, fmt.Sprintf("%s/members/g%d/m%d", base, j%500, j), member, sdk.Ephemeral(), sdk.MakeParents())
				default:
					_, err = c.Put(ctx, fmt.Sprintf("%s/values/v%d", base, i), value, sdk.MakeParents())
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				build.Add(time.Since(t0), time.Now())
				done.Add(1)
			}
		}(cs[w%len(cs)])
	}
	wg.Wait()
	stop()
	if err := firstErr.Load(); err != nil {
		return nil, fmt.Errorf("building the state: %w", *err)
	}
	out := []report.Result{{Scenario: "state", Case: fmt.Sprintf("build %d locks, %d members, %d values of %d B", sz.locks, sz.members, sz.values, sz.valueBytes),
		Params: map[string]string{"workers": strconv.Itoa(workers)}, Summary: build.Summarise(time.Since(start))}}

	extra := map[string]float64{}
	for i, pid := range procs {
		if rss := rssMB(pid); rss > 0 {
			extra[fmt.Sprintf("rss_mb_replica%d", i+1)] = rss
		}
	}
	// A writer keeps putting while the replicas save their snapshots: its
	// latencies show whether a snapshot holds up applies.
	probe := stats.NewRecorder(time.Now())
	pctx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		for i := 0; pctx.Err() == nil; i++ {
			t0 := time.Now()
			if _, err := cs[0].Put(pctx, base+"/probe", []byte(strconv.Itoa(i)), sdk.MakeParents()); err == nil {
				probe.Add(time.Since(t0), time.Now())
			}
		}
	}()
	saves := stats.NewRecorder(time.Now())
	sstart := time.Now()
	for i, ep := range e.endpoints {
		e.progress("snapshot on replica %d", i+1)
		var snap api.SnapshotResponse
		if err := postJSON(ctx, ep, api.RouteAdminSnapshot, api.SnapshotRequest{Cell: "demo"}, &snap); err != nil {
			return out, fmt.Errorf("snapshot on %s: %w", ep, err)
		}
		saves.Add(time.Duration(snap.SaveMS*float64(time.Millisecond)), time.Now())
		extra[fmt.Sprintf("snapshot_mb_replica%d", i+1)] = float64(snap.Bytes) / (1 << 20)
		extra[fmt.Sprintf("freeze_ms_replica%d", i+1)] = snap.FreezeMS
		extra["snapshot_index"] = float64(snap.Index)
	}
	stopProbe()
	<-probeDone
	out = append(out, report.Result{Scenario: "state", Case: "snapshot save, every replica (ops: replicas)", Summary: saves.Summarise(time.Since(sstart)), Extra: extra},
		report.Result{Scenario: "state", Case: "one writer's puts while the snapshots are saved", Summary: probe.Summarise(time.Since(sstart))})

	if len(procs) != len(e.endpoints) {
		e.progress("restore skipped: it needs --start (it restarts a replica by PID)")
		return out, nil
	}
	r, err := restoreFollower(ctx, e, procs)
	if err != nil {
		return out, fmt.Errorf("restore: %w", err)
	}
	return append(out, r), nil
}

// restoreFollower kill -9s a follower of the demo cell, starts it again on
// its data with the same command line, and measures its snapshot restore
// and its catch-up. procs is updated with the new PID.
func restoreFollower(ctx context.Context, e *env, procs []int) (report.Result, error) {
	leader, err := leaderIndex(ctx, e.endpoints, "demo")
	if err != nil {
		return report.Result{}, err
	}
	victim := (leader + 1) % len(procs)
	argv, err := cmdline(procs[victim])
	if err != nil {
		return report.Result{}, err
	}
	if err := syscall.Kill(procs[victim], syscall.SIGKILL); err != nil {
		return report.Result{}, err
	}
	// Its port is free once the kernel has torn the process down.
	for i := 0; i < 200 && alive(procs[victim]); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	target, err := appliedIndex(ctx, e.endpoints[leader], "demo")
	if err != nil {
		return report.Result{}, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	dieWithParent(cmd)
	if cmd.Stdout, err = os.CreateTemp("", "lockbench-restored-*.log"); err != nil {
		return report.Result{}, err
	}
	cmd.Stderr = cmd.Stdout
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return report.Result{}, err
	}
	procs[victim] = cmd.Process.Pid
	e.atExit(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if f, ok := cmd.Stdout.(*os.File); ok {
			f.Close()
			os.Remove(f.Name())
		}
	})
	ep := e.endpoints[victim]
	var caughtUp time.Duration
	for i := 0; ; i++ {
		if idx, err := appliedIndex(ctx, ep, "demo"); err == nil && idx >= target {
			caughtUp = time.Since(started)
			break
		}
		if i > 2400 {
			logf, _ := cmd.Stdout.(*os.File)
			tail := ""
			if logf != nil {
				b, _ := os.ReadFile(logf.Name())
				tail = string(b[max(0, len(b)-2000):])
			}
			return report.Result{}, fmt.Errorf("replica %d not caught up to %d within two minutes of its restart; its log ends:\n%s", victim+1, target, tail)
		}
		time.Sleep(50 * time.Millisecond)
	}
	restoreSecs, err := metricSum(ctx, []string{ep}, "lockd_snapshot_last_restore_seconds", `cell="demo"`)
	if err != nil {
		return report.Result{}, err
	}
	restores, err := metricSum(ctx, []string{ep}, "lockd_snapshot_restores", `cell="demo"`)
	if err != nil {
		return report.Result{}, err
	}
	rec := stats.NewRecorder(started)
	rec.Add(caughtUp, time.Now())
	extra := map[string]float64{
		"restore_ms": restoreSecs * 1000,
		"restores":   restores,
		fmt.Sprintf("rss_mb_replica%d", victim+1): rssMB(cmd.Process.Pid),
	}
	return report.Result{Scenario: "state", Case: fmt.Sprintf("replica %d kill -9 → restart → caught up (latency: start to caught up)", victim+1),
		Summary: rec.Summarise(caughtUp), Extra: extra}, nil
}

// appliedIndex is a replica's applied index of cell, from its status.
func appliedIndex(ctx context.Context, ep, cell string) (uint64, error) {
	cs, err := replicaStatus(ctx, ep, cell, 2*time.Second)
	return cs.AppliedIndex, err
}

// postJSON posts req to a route and decodes the reply, or its error.
func postJSON(ctx context.Context, ep, route string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, "POST", "http://"+ep+route, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r, err := (&http.Client{Timeout: 2 * time.Minute}).Do(hr)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		var er api.ErrorResponse
		if json.NewDecoder(r.Body).Decode(&er) == nil && er.Error != nil {
			return er.Error
		}
		return fmt.Errorf("%s: %s", route, r.Status)
	}
	return json.NewDecoder(r.Body).Decode(resp)
}
