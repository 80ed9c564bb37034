package timerslack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
)

// execEnv marks the process Ensure re-executed to give every thread its
// timer slack: the slack it asked for, in ns. It stops a second
// re-execution if the slack did not carry over, and is removed once read
// (so a lockproxy that lockd dev starts does not inherit it).
const execEnv = "LOCKD_TIMER_SLACK_EXEC"

// Ensure makes every thread of this process run with timer slack want
// (For; 0 leaves the OS's). Call it first, before anything is opened or
// read: it may run the binary again.
//
// prctl sets only the calling thread's slack, and a thread inherits its
// creator's: the Go runtime's first threads, the system monitor's among
// them, exist before main runs. So the binary sets want on its locked
// thread and executes itself again there (same PID, arguments and
// environment, plus execEnv); every thread of the new image descends
// from that one. blocked, if not "", is why this process cannot be run
// again (its config comes from a pipe): then nothing is changed. It
// returns only if no re-execution was needed or it could not be done
// (then the process goes on with the slack it had, and the report says
// why).
func Ensure(want time.Duration, blocked string) Report {
	marker := os.Getenv(execEnv)
	_ = os.Unsetenv(execEnv) // not passed on to anything this process runs
	r := Report{Want: want, ReExecuted: marker != "" && marker == nanos(want)}
	if want <= 0 {
		return r
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	now, err := threadSlack()
	r.Now = now
	switch {
	case err != nil:
		r.Note = err.Error()
		return r
	case now == want:
		return r
	case r.ReExecuted:
		r.Note = fmt.Sprintf("timer slack: the re-executed binary has slack %v, not %v (real-time scheduling?): going on with it", now, want)
		return r
	case blocked != "":
		r.Note = "timer slack: not set: " + blocked
		return r
	}
	image, err := runningImage()
	if err != nil {
		r.Note = err.Error()
		return r
	}
	image = invokedAs(image)
	if err := setThreadSlack(want); err != nil {
		r.Note = err.Error()
		return r
	}
	if mutant.On(mutant.TimerSlackOneThread) {
		r.Now = want // the calling thread only: the runtime's other threads keep the OS's
		return r
	}
	env := append(os.Environ(), execEnv+"="+nanos(want))
	err = syscall.Exec(image, os.Args, env) // returns only on failure
	// This thread goes back to the runtime, which may make threads from
	// it: it gets the slack the others have again.
	_ = setThreadSlack(now)
	r.Note = fmt.Sprintf("timer slack: re-executing %s: %v", image, err)
	return r
}

func nanos(d time.Duration) string { return strconv.FormatInt(d.Nanoseconds(), 10) }

// runningImage is the path of the file this code runs from: the mapping
// of /proc/self/maps that holds it. Not /proc/self/exe (the kernel names
// a process after the file executed, what ps, top and pgrep show, and
// "exe" would hide a lockd or lockproxy from its operators; started
// through the dynamic loader, /proc/self/exe is the loader). A binary
// replaced on disk since the start is what runs again (what the operator
// installed); one removed is an error.
func runningImage() (string, error) {
	pc := uint64(reflect.ValueOf(runningImage).Pointer())
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return "", fmt.Errorf("timer slack: cannot find this binary to re-execute: %v", err)
	}
	for line := range strings.Lines(string(maps)) {
		// start-end perms offset dev inode path
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || pc < start || pc >= end {
			continue
		}
		path := strings.Join(f[5:], " ")
		if strings.HasSuffix(path, "(deleted)") || !strings.HasPrefix(path, "/") {
			return "", fmt.Errorf("timer slack: this binary (%s) cannot be run again", path)
		}
		return path, nil
	}
	return "", fmt.Errorf("timer slack: cannot find this binary in /proc/self/maps")
}

// invokedAs is the path this process was started by (os.Args[0], looked
// up in PATH as the shell did) when it names the same file as image, the
// mapped binary with its symlinks resolved; else image. Executed through
// the link, the process keeps the name it was started with (lockproxy
// installed as a link to lockproxy-1.4.2 stays "lockproxy" to pgrep -x).
func invokedAs(image string) string {
	p, err := exec.LookPath(os.Args[0])
	if err != nil {
		return image
	}
	if p, err = filepath.Abs(p); err != nil {
		return image
	}
	a, err1 := os.Stat(p)
	b, err2 := os.Stat(image)
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		return image
	}
	return p
}

// threadSlack is the calling thread's timer slack.
func threadSlack() (time.Duration, error) {
	v, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_TIMERSLACK, 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("timer slack: prctl(PR_GET_TIMERSLACK): %v", errno)
	}
	return time.Duration(v), nil
}

// setThreadSlack sets the calling thread's timer slack.
func setThreadSlack(d time.Duration) error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0); errno != 0 {
		return fmt.Errorf("timer slack: prctl(PR_SET_TIMERSLACK, %v): %v", d, errno)
	}
	return nil
}
