package listen

// A bound on the connections a server holds open, counted from accept to
// close whoever holds them: fasthttp's Concurrency counts only the
// connections it is serving, and a connection it has handed over (a
// lockd's parked KeepAlive, an idle connection parked by
// internal/connpark) is counted by nothing else.

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// overLimit is what a plain-HTTP client gets when the server holds its
// bound (a TLS client sees its handshake fail): it tries another server.
const overLimit = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 105\r\n\r\n" +
	`{"error":{"code":"unavailable","message":"this server holds its bound of open connections; try another"}}`

// Limited is a net.Listener that holds at most Max connections open: past
// it an accepted connection is closed at once (answered 503 first when
// Plain). It knows its open connections, so that a server's bounded
// shutdown can close those its clients keep (CloseAll).
type Limited struct {
	net.Listener
	Max   int
	Plain bool
	open  atomic.Int64
	// Refused counts the connections closed for the bound.
	Refused atomic.Uint64

	mu    sync.Mutex
	conns map[*countedConn]struct{} // the open ones: at most Max
	ended bool                      // CloseAll was called
}

// Limit wraps ln.
func Limit(ln net.Listener, max int, plain bool) *Limited {
	return &Limited{Listener: ln, Max: max, Plain: plain}
}

// Open is how many of its connections are open.
func (l *Limited) Open() int { return int(l.open.Load()) }

// Accept returns the next connection within the bound.
func (l *Limited) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if int(l.open.Add(1)) <= l.Max {
			if cc := l.track(c); cc != nil {
				return cc, nil
			}
			continue // CloseAll has run: closed at once
		}
		l.open.Add(-1)
		l.Refused.Add(1)
		if l.Plain {
			_, _ = c.Write([]byte(overLimit))
		}
		_ = c.Close()
	}
}

// track records c as open; nil (c closed) once CloseAll has run.
func (l *Limited) track(c net.Conn) *countedConn {
	cc := &countedConn{Conn: c, l: l}
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		_ = cc.Close()
		return nil
	}
	if l.conns == nil {
		l.conns = make(map[*countedConn]struct{})
	}
	l.conns[cc] = struct{}{}
	l.mu.Unlock()
	return cc
}

// CloseAll closes every open connection, whoever holds it (a TLS client
// that never finished its handshake, a client silent after its answer),
// and every one accepted after: the end of a server's bounded shutdown.
// It returns how many it closed.
func (l *Limited) CloseAll() int {
	l.mu.Lock()
	l.ended = true
	open := make([]*countedConn, 0, len(l.conns))
	for c := range l.conns {
		open = append(open, c)
	}
	l.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
	return len(open)
}

// countedConn gives its slot back when it first closes.
type countedConn struct {
	net.Conn
	l    *Limited
	once sync.Once
}

// SyscallConn is its connection's, so that a poller may watch the
// descriptor (idle connections, internal/connpark/idle.go).
func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("not a socket")
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		c.l.open.Add(-1)
	})
	return err
}
