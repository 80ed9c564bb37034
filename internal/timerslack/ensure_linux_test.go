package timerslack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// childEnv makes the test binary the child of TestTimerSlackEveryThread.
const childEnv = "LOCKD_TEST_TIMER_SLACK_CHILD"

// childThreads is how many goroutines the child locks to threads of their
// own, so that the runtime makes threads after the slack is set too.
const childThreads = 4

// TestTimerSlackEveryThread runs Ensure as lockd serve and lockproxy do, in
// a child process (this test binary again): every thread the child has
// afterwards, the runtime's first ones (the system monitor's) among them,
// has the slack asked for, and the child is the same process (the same
// PID and name, also when started through a symlink) re-executed once.
func TestTimerSlackEveryThread(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		timerSlackChild()
		return
	}
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	// Started through a link, the process keeps the link's name.
	link := filepath.Join(t.TempDir(), "slack-link")
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	for _, as := range []string{self, link} {
		t.Run(filepath.Base(as), func(t *testing.T) { checkEveryThread(t, as) })
	}
}

// checkEveryThread runs the child as path and checks what it printed.
func checkEveryThread(t *testing.T, path string) {
	const want = 1500 * time.Microsecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-test.run=^TestTimerSlackEveryThread$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.FormatInt(want.Nanoseconds(), 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	var threads int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "report":
			if f[1] != "re-executed" {
				t.Errorf("child report %q, want re-executed", f[1])
			}
		case len(f) == 2 && f[0] == "comm":
			// The process keeps its name (ps, pgrep): the kernel names it
			// after the file executed, at most 15 bytes.
			if want := filepath.Base(path); f[1] != want[:min(len(want), 15)] {
				t.Errorf("child's name %q after re-executing, want %q", f[1], want)
			}
		case len(f) == 2 && f[0] == "eperm":
			t.Skipf("reading another thread's timer slack needs CAP_SYS_NICE, which this test lacks (thread %s)", f[1])
		case len(f) == 2 && f[0] == "pid":
			if f[1] != strconv.Itoa(cmd.Process.Pid) {
				t.Errorf("child pid %s after re-executing, want %d (the same process)", f[1], cmd.Process.Pid)
			}
		case len(f) == 3 && f[0] == "thread":
			threads++
			if f[2] != strconv.FormatInt(want.Nanoseconds(), 10) {
				t.Errorf("thread %s has timer slack %s ns, want %d", f[1], f[2], want.Nanoseconds())
			}
		}
	}
	if threads < childThreads+2 {
		t.Fatalf("child listed %d threads, want at least %d:\n%s", threads, childThreads+2, out)
	}
}

// timerSlackChild is the child: it sets the slack (re-executing itself),
// makes threads, and prints every thread's slack.
func timerSlackChild() {
	ns, err := strconv.ParseInt(os.Getenv(childEnv), 10, 64)
	if err != nil {
		fmt.Println("bad", childEnv)
		os.Exit(2)
	}
	r := Ensure(time.Duration(ns), "")
	switch {
	case r.Note != "":
		fmt.Println("report", strings.ReplaceAll(r.Note, " ", "_"))
	case r.ReExecuted:
		fmt.Println("report re-executed")
	default:
		fmt.Println("report in-place")
	}
	fmt.Println("pid", os.Getpid())
	if comm, err := os.ReadFile("/proc/self/comm"); err == nil {
		fmt.Println("comm", strings.TrimSpace(string(comm)))
	}
	var ready, done sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < childThreads; i++ {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread() // a thread of its own, made now
			ready.Done()
			<-stop
		}()
	}
	ready.Wait()
	tids, _ := filepath.Glob("/proc/self/task/*")
	for _, p := range tids {
		tid := filepath.Base(p)
		b, err := os.ReadFile("/proc/" + tid + "/timerslack_ns")
		switch {
		case errors.Is(err, fs.ErrPermission):
			fmt.Println("eperm", tid) // another thread's slack: CAP_SYS_NICE only
			continue
		case err != nil:
			fmt.Println("thread", tid, "unreadable:"+err.Error())
			continue
		}
		fmt.Println("thread", tid, strings.TrimSpace(string(b)))
	}
	close(stop)
	done.Wait()
}
