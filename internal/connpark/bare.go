package connpark

// A hijacked connection's bare socket, and the bytes its client sent
// ahead of it (pipelined), read before the socket's own.

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// maxPipelined bounds the bytes a client may have sent after a request
// whose connection is taken (HTTP pipelining): past it the connection is
// closed.
const maxPipelined = 64 << 10

// Bare is the connection under fasthttp's hijacked one, without the
// read buffer fasthttp keeps with it (4 KB a connection). Bytes the
// client sent after the request (pipelined) are taken out of that buffer
// first, with the connection's reads made to fail at once, and are read
// again before the connection's own.
func Bare(c net.Conn) (net.Conn, error) {
	u, ok := c.(interface{ UnsafeConn() net.Conn })
	if !ok {
		return c, nil
	}
	raw := u.UnsafeConn()
	if err := raw.SetReadDeadline(time.Unix(1, 0)); err != nil {
		return nil, err
	}
	var pending []byte
	bp := probeBufs.Get().(*[]byte)
	defer probeBufs.Put(bp)
	buf := *bp
	for {
		n, err := c.Read(buf)
		pending = append(pending, buf[:n]...)
		if len(pending) > maxPipelined {
			return nil, errors.New("too much pipelined after a request")
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if err := raw.SetReadDeadline(time.Time{}); err != nil {
		return nil, err
	}
	// A connection parked before with bytes pipelined: those were read
	// above, through it; one wrapper at most.
	switch w := raw.(type) {
	case *tlsPrefixConn:
		raw = w.Conn
	case *prefixConn:
		raw = w.Conn
	}
	if len(pending) == 0 {
		return raw, nil
	}
	pc := &prefixConn{Conn: raw, prefix: pending}
	if t, ok := raw.(tlsConn); ok {
		return &tlsPrefixConn{prefixConn: pc, t: t}, nil
	}
	return pc, nil
}

// tlsConn is what fasthttp asks of a connection to see its TLS state.
type tlsConn interface {
	Handshake() error
	ConnectionState() tls.ConnectionState
}

// probeBufs are the buffers Bare reads pipelined bytes into (one per
// held connection would be most of what it costs).
var probeBufs = sync.Pool{New: func() any { b := make([]byte, 512); return &b }}

// prefixConn reads prefix before its connection. ci is what the idle
// poller's decision knows of it (idle.go), and wrote when its last
// answer was written: only the goroutine serving it reads and writes
// them (a hand-over to another passes through a channel).
type prefixConn struct {
	net.Conn
	prefix []byte
	ci     connIdle
	wrote  time.Time
}

func (c *prefixConn) pending() bool { return len(c.prefix) > 0 }

// mark sets what parkAfter is to know of c, with no answer written since.
func (c *prefixConn) mark(ci connIdle) { c.ci, c.wrote = ci, time.Time{} }

// idle is what parkAfter knows of c for a request that arrived at now.
func (c *prefixConn) idle(now time.Time) connIdle {
	ci := c.ci
	if !c.wrote.IsZero() {
		ci.gap = now.Sub(c.wrote)
	}
	return ci
}

// Write notes when the answer was written (fasthttp flushes an answer in
// one Write or more, the last at its end).
func (c *prefixConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.wrote = time.Now()
	return n, err
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// tlsPrefixConn is a prefixConn over TLS: fasthttp finds its client
// certificate through ConnectionState.
type tlsPrefixConn struct {
	*prefixConn
	t tlsConn
}

func (c *tlsPrefixConn) Handshake() error                     { return c.t.Handshake() }
func (c *tlsPrefixConn) ConnectionState() tls.ConnectionState { return c.t.ConnectionState() }
