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
	cs, closeAll, err := e.clients(ctx, 16)
	if err != nil {
		return nil, err
	}
	// The clients hold the locks and members: they stay open until the
	// measurement ends.
	defer closeAll()
	base := fmt.Sprintf("/demo/lockbench/%s/state", e.run)
	build, err := buildState(ctx, e, cs, base, sz)
	if err != nil {
		return nil, err
	}
	out := []report.Result{build}
	snaps, err := snapshotAll(ctx, e, cs[0], base, procs)
	if err != nil {
		return out, err
	}
	out = append(out, snaps...)

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

// stateBuild is the state being built: node i (of total) is a lock, a
// member or a value by its place in sz's counts.
type stateBuild struct {
	sz            stateSize
	base          string
	value, member []byte
	total         int
	rec           *stats.Recorder
	next, done    atomic.Int64
	firstErr      atomic.Pointer[error]
}

// buildState creates the state on workers that share the clients, and
// reports the creates' latency.
func buildState(ctx context.Context, e *env, cs []*sdk.Client, base string, sz stateSize) (report.Result, error) {
	const workers = 64
	b := &stateBuild{sz: sz, base: base, value: bytes.Repeat([]byte("v"), sz.valueBytes), member: []byte("host-0000.example:8080"),
		total: sz.locks + sz.members + sz.values, rec: stats.NewRecorder(time.Now())}
	start := time.Now()
	stop := e.tick(func() string { return fmt.Sprintf("building: %d/%d nodes", b.done.Load(), b.total) })
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(c *sdk.Client) {
			defer wg.Done()
			b.worker(ctx, c)
		}(cs[w%len(cs)])
	}
	wg.Wait()
	stop()
	if err := b.firstErr.Load(); err != nil {
		return report.Result{}, fmt.Errorf("building the state: %w", *err)
	}
	return report.Result{Scenario: "state", Case: fmt.Sprintf("build %d locks, %d members, %d values of %d B", sz.locks, sz.members, sz.values, sz.valueBytes),
		Params: map[string]string{"workers": strconv.Itoa(workers)}, Summary: b.rec.Summarise(time.Since(start))}, nil
}

// worker creates the next node until all are made, ctx ends or a create
// fails.
func (b *stateBuild) worker(ctx context.Context, c *sdk.Client) {
	for {
		i := int(b.next.Add(1)) - 1
		if i >= b.total || ctx.Err() != nil || b.firstErr.Load() != nil {
			return
		}
		t0 := time.Now()
		if err := b.create(ctx, c, i); err != nil {
			b.firstErr.CompareAndSwap(nil, &err)
			return
		}
		b.rec.Add(time.Since(t0), time.Now())
		b.done.Add(1)
	}
}

// create makes node i: a lock node, an ephemeral member, or a value.
func (b *stateBuild) create(ctx context.Context, c *sdk.Client, i int) error {
	var err error
	switch sz, base := b.sz, b.base; {
	case i < sz.locks:
		_, _, err = c.CreateLockNode(ctx, fmt.Sprintf("%s/locks/l%d", base, i), api.LockExclusive, nil)
	case i < sz.locks+sz.members:
		j := i - sz.locks
		_, err = c.Create(ctx, fmt.Sprintf("%s/members/g%d/m%d", base, j%500, j), b.member, sdk.Ephemeral(), sdk.MakeParents())
	default:
		_, err = c.Put(ctx, fmt.Sprintf("%s/values/v%d", base, i), b.value, sdk.MakeParents())
	}
	return err
}

// snapshotAll has every replica save a snapshot while one writer (c)
// keeps putting, and reports the saves (with each replica's RSS, snapshot
// size and freeze) and the writer's latency meanwhile.
func snapshotAll(ctx context.Context, e *env, c *sdk.Client, base string, procs []int) ([]report.Result, error) {
	extra := map[string]float64{}
	for i, pid := range procs {
		if rss := rssMB(pid); rss > 0 {
			extra[fmt.Sprintf("rss_mb_replica%d", i+1)] = rss
		}
	}
	// A writer keeps putting while the replicas save their snapshots: its
	// latencies show whether a snapshot holds up applies.
	probe, stopProbe := startPutProbe(ctx, c, base+"/probe")
	defer stopProbe()
	saves := stats.NewRecorder(time.Now())
	sstart := time.Now()
	for i, ep := range e.endpoints {
		e.progress("snapshot on replica %d", i+1)
		var snap api.SnapshotResponse
		if err := postJSON(ctx, ep, api.RouteAdminSnapshot, api.SnapshotRequest{Cell: "demo"}, &snap); err != nil {
			return nil, fmt.Errorf("snapshot on %s: %w", ep, err)
		}
		saves.Add(time.Duration(snap.SaveMS*float64(time.Millisecond)), time.Now())
		extra[fmt.Sprintf("snapshot_mb_replica%d", i+1)] = float64(snap.Bytes) / (1 << 20)
		extra[fmt.Sprintf("freeze_ms_replica%d", i+1)] = snap.FreezeMS
		extra["snapshot_index"] = float64(snap.Index)
	}
	stopProbe()
	return []report.Result{{Scenario: "state", Case: "snapshot save, every replica (ops: replicas)", Summary: saves.Summarise(time.Since(sstart)), Extra: extra},
		{Scenario: "state", Case: "one writer's puts while the snapshots are saved", Summary: probe.Summarise(time.Since(sstart))}}, nil
}

// startPutProbe puts key over and over on c, recording the puts that
// succeed, until stop (which waits for the last put).
func startPutProbe(ctx context.Context, c *sdk.Client, key string) (rec *stats.Recorder, stop func()) {
	probe := stats.NewRecorder(time.Now())
	pctx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		for i := 0; pctx.Err() == nil; i++ {
			t0 := time.Now()
			if _, err := c.Put(pctx, key, []byte(strconv.Itoa(i)), sdk.MakeParents()); err == nil {
				probe.Add(time.Since(t0), time.Now())
			}
		}
	}()
	return probe, func() { stopProbe(); <-probeDone }
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
	argv, err := killReplica(procs[victim])
	if err != nil {
		return report.Result{}, err
	}
	target, err := appliedIndex(ctx, e.endpoints[leader], "demo")
	if err != nil {
		return report.Result{}, err
	}
	cmd, started, err := e.restartReplica(argv)
	if err != nil {
		return report.Result{}, err
	}
	procs[victim] = cmd.Process.Pid
	ep := e.endpoints[victim]
	caughtUp, err := waitCaughtUp(ctx, ep, target, started, cmd, victim)
	if err != nil {
		return report.Result{}, err
	}
	return restoreResult(ctx, ep, victim, started, caughtUp, cmd.Process.Pid)
}

// killReplica kill -9s the replica process pid and waits (up to 5 s) for
// the kernel to tear it down, freeing its port; it returns the process's
// command line.
func killReplica(pid int) ([]string, error) {
	argv, err := cmdline(pid)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, err
	}
	// Its port is free once the kernel has torn the process down.
	for i := 0; i < 200 && alive(pid); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	return argv, nil
}

// restartReplica starts argv again, its output to a temporary log; it is
// killed (and the log removed) when lockbench ends.
func (e *env) restartReplica(argv []string) (cmd *exec.Cmd, started time.Time, err error) {
	cmd = exec.Command(argv[0], argv[1:]...)
	dieWithParent(cmd)
	if cmd.Stdout, err = os.CreateTemp("", "lockbench-restored-*.log"); err != nil {
		return nil, time.Time{}, err
	}
	cmd.Stderr = cmd.Stdout
	started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, time.Time{}, err
	}
	e.atExit(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if f, ok := cmd.Stdout.(*os.File); ok {
			f.Close()
			os.Remove(f.Name())
		}
	})
	return cmd, started, nil
}

// waitCaughtUp waits (two minutes at most) until the replica at ep has
// applied target, and returns how long after started it had; on time out
// the error carries the end of cmd's log.
func waitCaughtUp(ctx context.Context, ep string, target uint64, started time.Time, cmd *exec.Cmd, victim int) (time.Duration, error) {
	for i := 0; ; i++ {
		if idx, err := appliedIndex(ctx, ep, "demo"); err == nil && idx >= target {
			return time.Since(started), nil
		}
		if i > 2400 {
			logf, _ := cmd.Stdout.(*os.File)
			tail := ""
			if logf != nil {
				b, _ := os.ReadFile(logf.Name())
				tail = string(b[max(0, len(b)-2000):])
			}
			return 0, fmt.Errorf("replica %d not caught up to %d within two minutes of its restart; its log ends:\n%s", victim+1, target, tail)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restoreResult reports the restarted replica's catch-up, with its
// snapshot restore time and count (from its metrics) and its RSS.
func restoreResult(ctx context.Context, ep string, victim int, started time.Time, caughtUp time.Duration, pid int) (report.Result, error) {
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
		fmt.Sprintf("rss_mb_replica%d", victim+1): rssMB(pid),
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
