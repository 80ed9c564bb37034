package docs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// job is a background job of a block's bash (lockctl elect, lockctl
// watch, a command ending in "&"): its PID, which job control made its
// process group, and its start time, so that a reused PID is never taken
// for it.
type job struct {
	pid   int
	start string
}

// addJob records the job $! names, unless it has already exited.
func (s *session) addJob(bang string) {
	pid, err := strconv.Atoi(bang)
	if err != nil || pid <= 0 {
		return
	}
	if _, start, ok := procStat(pid); ok {
		s.jobs = append(s.jobs, job{pid: pid, start: start})
	}
}

// await waits for what a background command n prints: its expected lines
// within BackgroundExpectWait, or, with none, its first line or
// BackgroundSettle. One a marker backgrounded fails if it exits non-zero
// meanwhile.
func (s *session) await(n int, c Command, expect []string) error {
	wait := BackgroundSettle
	if len(expect) > 0 {
		wait = BackgroundExpectWait
	}
	deadline := time.Now().Add(wait)
	for {
		out := s.read(n, "out")
		if st := strings.TrimSpace(s.read(n, "exit")); c.Background && st != "" {
			if st != "0" {
				return fmt.Errorf("exited with status %s before the block ended", st)
			}
			return Match(out, expect)
		}
		if len(expect) > 0 && Matched(out, expect) || len(expect) == 0 && strings.Contains(out, "\n") {
			return nil
		}
		if time.Now().After(deadline) {
			if len(expect) > 0 {
				return fmt.Errorf("after %v: %v", wait, Match(out, expect))
			}
			return nil
		}
		time.Sleep(pollEvery)
	}
}

// alive reports whether the job still runs (not a zombie, not a new
// process under its PID).
func (j job) alive() bool {
	state, start, ok := procStat(j.pid)
	return ok && start == j.start && state != "Z"
}

// stopJobs stops the jobs still running: SIGTERM to each one's process
// group, then SIGKILL to those still running after BackgroundStop.
func (s *session) stopJobs() {
	for _, j := range s.jobs {
		if j.alive() {
			_ = syscall.Kill(-j.pid, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(BackgroundStop)
	for _, j := range s.jobs {
		for j.alive() && time.Now().Before(deadline) {
			time.Sleep(pollEvery)
		}
		if j.alive() {
			_ = syscall.Kill(-j.pid, syscall.SIGKILL)
		}
	}
	s.jobs = nil
}

// procStat reads pid's state and start time (fields 3 and 22 of
// /proc/PID/stat).
func procStat(pid int) (state, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", "", false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 20 {
		return "", "", false
	}
	return f[0], f[19], true
}
