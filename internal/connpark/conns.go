// Package connpark holds a fasthttp server's connections without a
// goroutine: those of requests answered later (a lockd's parked
// KeepAlives), taken from fasthttp (hijacked) until their answer is
// written, and those idle between two requests (idle.go), whose
// descriptors wait in an epoll set of their own (idlepoll_linux.go). Once
// answered, or readable, a connection is served by fasthttp again
// (Conns.ServeAgain). A lockd's API and a lockproxy's client API share
// it.
//
// A server using it must keep hijacked connections
// (fasthttp.Server.KeepHijackedConns), so it bounds its connections at
// its listener (internal/listen.Limit): fasthttp's own bound does not
// count a hijacked one.
package connpark

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/internal/mutant"
)

// Conns is one server's connections held away from fasthttp: those of
// parked requests (Hold, Release) and the idle ones (ParkIdle), and the
// goroutines that serve them again. The zero value holds nothing until
// Serve.
type Conns struct {
	mu     sync.Mutex
	serve  func(net.Conn) error
	closed bool
	held   map[any]net.Conn
	// serving are the connections handed back to fasthttp (ServeAgain)
	// until its ServeConn returns: fasthttp's Shutdown does not count a
	// connection served after it returned, so CloseServing closes them.
	// A count: one taken again may be handed back (the same connection)
	// before the ServeConn that served it has returned.
	serving map[net.Conn]int
	// idle hands a connection to a server goroutine waiting for one;
	// done ends those (Close).
	idle chan net.Conn
	done chan struct{}
	// poller holds connections idle between requests (idle.go), once
	// ParkIdle has made it, until Close; atomic for the request path,
	// which reads it without the lock.
	poller atomic.Pointer[idlePoller]
	// parksAtClose is the poller's count of parks when Close ended it (a
	// counter does not go back to 0).
	parksAtClose atomic.Uint64
}

// Serve lets cs take connections: serve is the fasthttp server's
// ServeConn, which takes a connection back once its answer is written,
// or once it is readable again.
func (cs *Conns) Serve(serve func(net.Conn) error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.serve = serve
	cs.idle, cs.done = make(chan net.Conn), make(chan struct{})
}

// Ready reports whether a connection may be taken now: Serve was called,
// and Close not yet.
func (cs *Conns) Ready() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.serve != nil && !cs.closed
}

// Close closes the connections held (their clients retry elsewhere) and
// the idle ones; a connection held or handed back afterwards is closed at
// once. The owner then shuts its fasthttp server down, and calls
// CloseServing.
func (cs *Conns) Close() {
	cs.mu.Lock()
	if !cs.closed && cs.done != nil {
		close(cs.done)
	}
	cs.closed = true
	for _, c := range cs.held {
		_ = c.Close()
	}
	cs.held = nil
	poller := cs.poller.Swap(nil) // no connection is parked from now
	cs.mu.Unlock()
	// Outside the lock: the poller's loop may be handing a connection
	// back (woken), which takes it.
	if poller != nil {
		poller.close()
		cs.parksAtClose.Store(poller.parks())
	}
}

// Hold records c as the connection of a parked request, key, until
// Release; false if cs is closed (the caller closes c).
func (cs *Conns) Hold(key any, c net.Conn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return false
	}
	if cs.held == nil {
		cs.held = map[any]net.Conn{}
	}
	cs.held[key] = c
	return true
}

// Release forgets key's connection; it returns how to serve it again, and
// false if cs is closed (the caller closes it).
func (cs *Conns) Release(key any) (func(net.Conn) error, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.held, key)
	return cs.serve, !cs.closed && cs.serve != nil
}

// Held is how many parked requests' connections cs holds.
func (cs *Conns) Held() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.held)
}

// serveIdle is how long a goroutine that served a connection again waits
// for the next one before it ends.
const serveIdle = 10 * time.Second

// CloseServing closes the connections handed back to fasthttp that it
// still serves: call it after the server's Shutdown returned, which
// waited for those it knew of, but not for one whose ServeConn began
// after (a hand-back racing the Close), which would be served on by a
// server that has stopped.
func (cs *Conns) CloseServing() {
	if mutant.On(mutant.ServedAfterClose) {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for c := range cs.serving {
		_ = c.Close()
	}
}

// ServeAgain serves c on an idle server goroutine, or a new one, unless cs
// is closed (then c is closed). A connection served again runs fasthttp's
// request loop until it is taken again: a goroutine kept from the last
// one has the stack it needs, where a new one would grow (copy) its stack
// every time.
func (cs *Conns) ServeAgain(c net.Conn, serve func(net.Conn) error) {
	cs.mu.Lock()
	if cs.closed && !mutant.On(mutant.ServedAfterClose) {
		cs.mu.Unlock()
		_ = c.Close()
		return
	}
	if cs.serving == nil {
		cs.serving = map[net.Conn]int{}
	}
	cs.serving[c]++
	cs.mu.Unlock()
	select {
	case cs.idle <- c:
	default:
		go cs.server(c, serve)
	}
}

// server serves connections given to it, until none comes for serveIdle
// or cs closes.
func (cs *Conns) server(c net.Conn, serve func(net.Conn) error) {
	t := time.NewTimer(serveIdle)
	defer t.Stop()
	for {
		// Until the connection closes or is taken again. fasthttp
		// closes it on every error but one.
		if err := serve(c); errors.Is(err, fasthttp.ErrPerIPConnLimit) {
			_ = c.Close()
		}
		cs.mu.Lock()
		if cs.serving[c]--; cs.serving[c] <= 0 {
			delete(cs.serving, c)
		}
		cs.mu.Unlock()
		t.Reset(serveIdle)
		select {
		case c = <-cs.idle:
		case <-t.C:
			return
		case <-cs.done:
			return
		}
	}
}
