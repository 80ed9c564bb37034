package fake

// The in-memory network (Options.Memory): each replica listens on a
// memListener, and Cell.Dial hands it one end of a net.Pipe. Nothing
// blocks on a socket, so a test may run the fake and its clients in a
// testing/synctest bubble, where time advances only when every goroutine
// waits: a lease, a grace period or a lock-delay then passes at once.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// memAddr is an in-memory replica's address ("host:port", as the
// directory lists endpoints).
type memAddr string

func (memAddr) Network() string  { return "memory" }
func (a memAddr) String() string { return string(a) }

// memListener is a net.Listener whose connections come from dial.
type memListener struct {
	addr  memAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener(addr string) *memListener {
	return &memListener{addr: memAddr(addr), conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for a dial or Close.
func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept; dials are refused from then on.
func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the listener's address.
func (l *memListener) Addr() net.Addr { return l.addr }

// dial hands the server's end of a new pipe to Accept and returns the
// client's end: refused once the listener is closed.
func (l *memListener) dial(ctx context.Context) (net.Conn, error) {
	cli, srv := net.Pipe()
	select {
	case l.conns <- serverEnd{srv}:
		return cli, nil
	case <-l.done:
		err := refused(string(l.addr))
		_ = cli.Close()
		_ = srv.Close()
		return nil, err
	case <-ctx.Done():
		_ = cli.Close()
		_ = srv.Close()
		return nil, &net.OpError{Op: "dial", Net: "memory", Addr: l.addr, Err: ctx.Err()}
	}
}

// serverEnd is the server's end of a pipe. Its errors once the client
// has hung up read as a TCP connection's do (a broken pipe), which
// fasthttp does not log.
type serverEnd struct{ net.Conn }

func (c serverEnd) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	return n, brokenPipe(err)
}

func (c serverEnd) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	return n, brokenPipe(err)
}

func (c serverEnd) SetDeadline(t time.Time) error { return brokenPipe(c.Conn.SetDeadline(t)) }

func (c serverEnd) SetReadDeadline(t time.Time) error {
	return brokenPipe(c.Conn.SetReadDeadline(t))
}

func (c serverEnd) SetWriteDeadline(t time.Time) error {
	return brokenPipe(c.Conn.SetWriteDeadline(t))
}

func brokenPipe(err error) error {
	if errors.Is(err, io.ErrClosedPipe) {
		return &net.OpError{Op: "write", Net: "memory", Err: os.NewSyscallError("write", syscall.EPIPE)}
	}
	return err
}

// refused is the error of a dial where nothing listens: it wraps
// syscall.ECONNREFUSED, as a TCP dial's does.
func refused(addr string) error {
	return &net.OpError{Op: "dial", Net: "memory", Addr: memAddr(addr), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// memReplicaAddr is the address of an in-memory cell's replica i.
func memReplicaAddr(cell string, i int) string {
	return fmt.Sprintf("replica%d.%s.memory:80", i, cell)
}

// Dial connects to the replica at addr over the in-memory network: the
// sdk.Config.Dial of a client of a Cell started with Options.Memory.
// Any other address (a TCP replica's, DeadAddr's) is refused.
func (c *Cell) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	for _, r := range c.replicas {
		if ml, ok := r.ln.(*memListener); ok && r.addr == addr {
			return ml.dial(ctx)
		}
	}
	return nil, refused(addr)
}

// listen opens replica i's listener: on the in-memory network, or on a
// loopback port.
func (c *Cell) listen(memory bool, i int) (net.Listener, error) {
	if memory {
		return newMemListener(memReplicaAddr(c.name, i)), nil
	}
	return net.Listen("tcp", "127.0.0.1:0")
}
