package connpark

// The idle poller: idle keep-alive connections' descriptors in an epoll
// set of its own, watched by one goroutine, so that an idle connection
// holds no goroutine and no buffer (idle.go). Go's own poller keeps each
// descriptor too; the two sets are independent, and the runtime's sees
// the readiness again when fasthttp next reads.

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockservice/lockd/internal/mutant"
)

// idleEvents bounds the readiness events one epoll_wait returns (more
// wait for the next).
const idleEvents = 256

// idleSweep is how often the poller looks for connections idle past their
// timeout, and so how late past it one may be closed.
const idleSweep = time.Second

type idlePoller struct {
	epfd, wakefd int
	timeout      time.Duration
	max          int
	ready        func(c net.Conn, parkedFor time.Duration)

	// parked counts the connections ever parked.
	parked atomic.Uint64

	mu     sync.Mutex
	conns  map[int]idleConn // by descriptor
	closed bool
	done   chan struct{} // closed when the loop has ended
}

// idleConn is a parked connection and when it was parked.
type idleConn struct {
	c     net.Conn
	since time.Time
}

// newIdlePoller starts a poller that holds at most max connections,
// closes one idle for timeout, and hands a readable one to ready (in its
// own goroutine's turn: ready must not block).
func newIdlePoller(timeout time.Duration, max int, ready func(net.Conn, time.Duration)) (*idlePoller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakefd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		_ = unix.Close(epfd)
		_ = unix.Close(wakefd)
		return nil, err
	}
	p := &idlePoller{epfd: epfd, wakefd: wakefd, timeout: timeout, max: max, ready: ready,
		conns: map[int]idleConn{}, done: make(chan struct{})}
	go p.loop()
	return p, nil
}

// add parks c until it is readable. False if the poller is full or
// closed, or c is not a socket it can watch: the caller keeps c.
func (p *idlePoller) add(c net.Conn) bool {
	fd, ok := connFD(c)
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.conns) >= p.max {
		return false
	}
	// One-shot: after its readiness the descriptor is removed (below,
	// under the lock) before anyone else may close it.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return false
	}
	p.conns[fd] = idleConn{c: c, since: time.Now()}
	p.parked.Add(1)
	return true
}

// held is how many connections the poller holds.
func (p *idlePoller) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// parks is how many connections were ever parked.
func (p *idlePoller) parks() uint64 { return p.parked.Load() }

// close closes every parked connection and ends the loop.
func (p *idlePoller) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.done
		return
	}
	p.closed = true
	all := p.conns
	p.conns = nil
	for fd := range all {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
	// The loop ends (and closes the eventfd) only once it has seen closed,
	// under this lock: the eventfd is still open here.
	_, _ = unix.Write(p.wakefd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	p.mu.Unlock()
	for _, ic := range all {
		_ = ic.c.Close()
	}
	<-p.done
}

// loop waits for readiness (or a sweep's turn) until the poller closes.
func (p *idlePoller) loop() {
	defer close(p.done)
	defer func() {
		_ = unix.Close(p.epfd)
		_ = unix.Close(p.wakefd)
	}()
	events := make([]unix.EpollEvent, idleEvents)
	nextSweep := time.Now().Add(idleSweep)
	for {
		n, err := unix.EpollWait(p.epfd, events, int(idleSweep/time.Millisecond))
		if err != nil && !errors.Is(err, syscall.EINTR) {
			p.close0()
			return
		}
		now := time.Now()
		ready, expired, closed := p.take(events[:max(n, 0)], now, !now.Before(nextSweep))
		if closed {
			return
		}
		if !now.Before(nextSweep) {
			nextSweep = now.Add(idleSweep)
		}
		for _, ic := range ready {
			p.ready(ic.c, now.Sub(ic.since))
		}
		for _, c := range expired {
			_ = c.Close()
		}
	}
}

// take removes from the set the connections events found readable and,
// on a sweep, those idle past the timeout; closed reports the poller
// closed.
func (p *idlePoller) take(events []unix.EpollEvent, now time.Time, sweep bool) (ready []idleConn, expired []net.Conn, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, true
	}
	for _, ev := range events {
		fd := int(ev.Fd)
		ic, ok := p.conns[fd]
		if !ok {
			continue // the wake-up's eventfd
		}
		delete(p.conns, fd)
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		ready = append(ready, ic)
	}
	if !sweep || p.timeout <= 0 || mutant.On(mutant.IdleNoTimeout) {
		return ready, nil, false
	}
	for fd, ic := range p.conns {
		if now.Sub(ic.since) >= p.timeout {
			delete(p.conns, fd)
			_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
			expired = append(expired, ic.c)
		}
	}
	return ready, expired, false
}

// close0 is close from the loop itself (epoll failed): every parked
// connection is closed, and the loop ends.
func (p *idlePoller) close0() {
	p.mu.Lock()
	p.closed = true
	all := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, ic := range all {
		_ = ic.c.Close()
	}
}

// connFD is c's socket descriptor (under TLS, the connection's beneath).
func connFD(c net.Conn) (int, bool) {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, false
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, false
	}
	return fd, fd >= 0
}
