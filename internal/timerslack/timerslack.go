// Package timerslack runs every thread of a lockd or lockproxy process
// with an OS timer slack (Linux: prctl PR_SET_TIMERSLACK).
//
// A thread's timer slack is how far the kernel may defer the end of its
// sleeps and timed waits to group wake-ups; it never delays a wake-up by
// I/O, and clock reads are unaffected. The Go runtime's system monitor
// (sysmon) sleeps 20 µs at a time while a process is busy and its
// goroutines make system calls, as a lockd's Raft log writes, fsyncs and
// connections, and a lockproxy's held KeepAlives, do all the time: with
// Linux's default slack of 50 µs that is over ten thousand wake-ups a
// second per process, each a context switch. A millisecond of slack lets
// the kernel batch them. Measured on the project's 2-core virtual
// machine (bench/RESULTS.md, Timer slack): five replicas' monitor went
// from 8.6 % of all CPU samples under 64 writers to 1.8 %, with 14 % more
// puts; a lockproxy renewing 5 000 sessions used about 12 % less CPU.
//
// The cost: a timer (a Raft tick, a lease's end, a long poll's hold, a
// batch's gap) may fire up to the slack late, never early; the services'
// waits all check the clock again when they wake, a server-side lease
// ending late is the safe side (the clients' conservative clocks end
// early), and their timeouts are milliseconds to seconds long.
package timerslack

import (
	"fmt"
	"log/slog"
	"time"
)

const (
	// DefaultUS is the slack when none is configured: 1 ms.
	DefaultUS = 1000
	// MaxUS bounds the setting: 10 ms, a tenth of the default Raft tick.
	// Past it the runtime's monitor would take a processor back from a
	// blocked fsync, or preempt a long goroutine, late enough to jitter
	// heartbeats.
	MaxUS = 10_000
)

// For is the slack a setting in µs asks for, 0 to keep the OS's own (-1).
// Pure.
func For(us int) (time.Duration, error) {
	switch {
	case us == -1:
		return 0, nil
	case us < -1 || us > MaxUS:
		return 0, fmt.Errorf("timer slack %d µs outside -1 (the OS's own) to %d", us, MaxUS)
	case us == 0:
		return DefaultUS * time.Microsecond, nil
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Report is what Ensure found and did, for the log.
type Report struct {
	Want, Now  time.Duration // asked for; the calling thread's after
	ReExecuted bool          // this process is the re-executed binary
	Note       string        // why the slack is not Want ("" when it is)
}

// Log logs the timer slack the process runs with, and why not the one
// configured if it does not.
func (r Report) Log(log *slog.Logger) {
	switch {
	case r.Want <= 0:
		log.Info("timer slack: the OS's own (timer_slack_us -1)")
	case r.Note != "":
		log.Warn(r.Note, "timer_slack_wanted", r.Want, "timer_slack", r.Now)
	default:
		log.Info("timer slack set on every thread", "timer_slack", r.Now, "re_executed", r.ReExecuted)
	}
}
