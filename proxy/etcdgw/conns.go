package etcdgw

import (
	"net"
	"sync"
	"time"
)

// Connections of the etcd port. No credential is needed to open one (a
// token is per call), so the port bounds them itself: at most
// MaxConns open (Accept waits past it, the proxy's own listener is not
// touched), a connection that has not finished its TLS and HTTP/2
// handshake within connHandshake is closed, and one with no call for
// connIdle is sent away (its client reconnects when it needs to).
// Before these (attack review, session 34), idle connections nobody
// authenticated stayed open for ever and could take every file
// descriptor of the lockproxy.

// MaxConns bounds the open connections of one gateway.
const MaxConns = 10_000

// connTiming are the port's connection timeouts: the named defaults,
// shortened by unit tests before they start a gateway.
type connTiming struct {
	handshake time.Duration
	idle      time.Duration
}

// connTimes is what every gateway runs with.
var connTimes = connTiming{handshake: 10 * time.Second, idle: 5 * time.Minute}

// limitListener is a listener with at most n connections open: Accept
// waits for one to close past that.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{} // closed by Close: a waiting Accept returns
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Accept takes a slot, then a connection; the slot frees when the
// connection closes.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, free: func() { <-l.slots }}, nil
}

// limitConn gives its slot back once, at its first Close.
type limitConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
