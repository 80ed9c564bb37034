package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// takeover measures what the fault suite does: a holder in a process of
// its own (lockctl lock PATH -- sleep) is killed with SIGKILL while a
// waiter blocks on the lock, and the time from the kill to the waiter's
// grant is recorded. Its floor is the lease (the holder's last KeepAlive
// may have renewed it just before the kill); the spec's bound is 15 s.
func takeover(ctx context.Context, e *env, lockctl string, trials int) ([]report.Result, error) {
	lockctl, err := binary(lockctl, "lockctl")
	if err != nil {
		return nil, err
	}
	c, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rec := stats.NewRecorder(time.Now())
	start := time.Now()
	for trial := 0; trial < trials; trial++ {
		path := fmt.Sprintf("/demo/lockbench/%s/takeover-%d", e.run, trial)
		took, err := takeoverOnce(ctx, e, c, lockctl, path)
		if err != nil {
			return nil, fmt.Errorf("trial %d: %w", trial+1, err)
		}
		e.progress("trial %d: granted %v after the holder's kill -9", trial+1, took.Round(time.Millisecond))
		rec.Add(took, time.Now())
	}
	return []report.Result{{Scenario: "takeover", Case: fmt.Sprintf("holder kill -9 → waiter granted, %d trials", trials),
		Params: map[string]string{"trials": strconv.Itoa(trials), "lease": e.lease.String()}, Summary: rec.Summarise(time.Since(start))}}, nil
}

func takeoverOnce(ctx context.Context, e *env, c *sdk.Client, lockctl, path string) (time.Duration, error) {
	holder := exec.CommandContext(ctx, lockctl, "--endpoints", strings.Join(e.endpoints, ","), "lock", path, "--", "sh", "-c", `echo "held $LOCK_TOKEN"; exec sleep 600`)
	// A process group of its own, so one kill takes lockctl and its job.
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := holder.StdoutPipe()
	if err != nil {
		return 0, err
	}
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); _ = holder.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "held ") {
		return 0, fmt.Errorf("holder (lockctl lock) printed %q: %v", line, err)
	}

	lctx, cancel := context.WithTimeout(ctx, time.Minute+3*e.lease)
	defer cancel()
	m := c.NewMutex(path)
	granted := make(chan error, 1)
	go func() { granted <- m.Lock(lctx) }()
	// Kill only once the waiter is queued behind the holder.
	for i := 0; ; i++ {
		kids, _, err := c.Children(lctx, path)
		if err == nil && len(kids) >= 2 {
			break
		}
		if i > 600 {
			return 0, fmt.Errorf("the waiter never queued (children %v, %v)", kids, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	killed := time.Now()
	if err := syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); err != nil {
		return 0, err
	}
	if err := <-granted; err != nil {
		return 0, fmt.Errorf("waiter: %w", err)
	}
	took := time.Since(killed)
	_ = m.Unlock(ctx)
	return took, nil
}
