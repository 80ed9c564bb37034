package lockd

import (
	"fmt"
	"time"
)

// The OS timer slack lockd serve runs with (Linux: prctl
// PR_SET_TIMERSLACK; server/cmd/lockd sets it on every thread of the
// process).
//
// A thread's timer slack is how far the kernel may defer the end of its
// sleeps and timed waits to group wake-ups; it never delays a wake-up by
// I/O, and clock reads are unaffected. The Go runtime's system monitor
// (sysmon) sleeps 20 µs at a time while a process is busy and its
// goroutines make system calls, as a lockd's Raft log writes, fsyncs and
// connections do all the time: with Linux's default slack of 50 µs that
// is over ten thousand wake-ups a second per lockd, each a context
// switch. A millisecond of slack lets the kernel batch them. Measured on
// the project's 2-core virtual machine, five replicas on one host: the
// monitor went from 8.6 % of all CPU samples under 64 writers to 1.8 %;
// alternated runs gave 14 % more puts, 6 % more acquires and an
// uncontended Lock+Unlock's p99 18 % lower (bench/RESULTS.md, Timer
// slack). The cost: a timer (a Raft tick, a lease's end, a long poll's
// hold) may fire up to the slack late, never early; lockd's waits all
// check the clock again when they wake, a server-side lease ending late
// is the safe side (the clients' conservative clocks end early), and its
// timeouts are milliseconds to seconds long.
const (
	// DefaultTimerSlackUS is the slack when none is configured: 1 ms.
	DefaultTimerSlackUS = 1000
	// maxTimerSlackUS bounds the setting: 10 ms, a tenth of the default
	// Raft tick. Past it the runtime's monitor would take a processor
	// back from a blocked fsync, or preempt a long goroutine, late enough
	// to jitter heartbeats.
	maxTimerSlackUS = 10_000
)

// TimerSlackFor is the timer slack the config asks for, 0 to keep the
// OS's own (TimerSlackUS -1). Pure.
func TimerSlackFor(c Config) (time.Duration, error) {
	switch {
	case c.TimerSlackUS == -1:
		return 0, nil
	case c.TimerSlackUS < -1 || c.TimerSlackUS > maxTimerSlackUS:
		return 0, fmt.Errorf("config: timer slack %d µs outside -1 (the OS's own) to %d", c.TimerSlackUS, maxTimerSlackUS)
	case c.TimerSlackUS == 0:
		return DefaultTimerSlackUS * time.Microsecond, nil
	}
	return time.Duration(c.TimerSlackUS) * time.Microsecond, nil
}
