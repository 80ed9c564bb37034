// Package listen keeps a server's listener alive when the process runs
// out of file descriptors: fasthttp ends Serve on any accept error that is
// not a timeout, so a flood of idle connections (no credential needed)
// would stop a lockd or a lockproxy for good. Accept here waits and tries
// again instead, as net/http does, and the connections already open go on.
package listen

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// Bounds of the pause between two accepts that ran out of descriptors.
const (
	minPause = 5 * time.Millisecond
	maxPause = time.Second
)

// Listener is a net.Listener whose Accept survives running out of file
// descriptors.
type Listener struct {
	net.Listener
	// Exhausted counts the accepts that found no descriptor free.
	Exhausted atomic.Uint64
	sleep     func(time.Duration)
}

// Retrying wraps ln.
func Retrying(ln net.Listener) *Listener {
	return &Listener{Listener: ln, sleep: time.Sleep}
}

// Accept waits for the next connection. When the process (or the system)
// has no file descriptor free, it pauses, from 5 ms doubling up to a
// second, and tries again: a descriptor frees as soon as any connection
// ends. Any other error ends it, as before.
func (l *Listener) Accept() (net.Conn, error) {
	pause := minPause
	for {
		c, err := l.Listener.Accept()
		if err == nil || !Exhausting(err) {
			return c, err
		}
		l.Exhausted.Add(1)
		l.sleep(pause)
		pause = min(2*pause, maxPause)
	}
}

// Exhausting reports whether err is the process or the system running out
// of file descriptors (EMFILE, ENFILE).
func Exhausting(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
