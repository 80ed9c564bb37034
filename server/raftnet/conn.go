package raftnet

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// msgConn sends message batches to one peer. dragonboat calls
// SendMessageBatch from one goroutine per connection and Close once.
type msgConn struct {
	t      *Transport
	target string
	ctx    context.Context // dragonboat's, from GetConnection: ends at shutdown

	mu     sync.Mutex
	conn   net.Conn
	dead   *atomic.Bool // set by the current conn's watcher
	closed bool
}

var _ raftio.IConnection = (*msgConn)(nil)

// SendMessageBatch writes the batch, first dialing again if the peer
// closed the connection since the last write (it restarted): the batch
// reaches the new process instead of a closed socket.
func (c *msgConn) SendMessageBatch(b pb.MessageBatch) error {
	payload, err := b.Marshal()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	if c.dead.Load() && !mutant.On(mutant.StaleConn) {
		ctx, cancel := context.WithTimeout(c.ctx, dialTimeout)
		err := c.redialLocked(ctx)
		cancel()
		if err != nil {
			return err
		}
	}
	return writeFrame(c.conn, methodRaft, payload, c.t.encrypted)
}

func (c *msgConn) redial(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.redialLocked(ctx)
}

// redialLocked replaces the connection with a new one and starts its
// watcher.
func (c *msgConn) redialLocked(ctx context.Context) error {
	if c.conn != nil {
		_ = c.conn.Close()
	}
	conn, err := c.t.dial(ctx, c.target)
	if err != nil {
		c.conn = nil
		c.dead = new(atomic.Bool)
		c.dead.Store(true)
		return err
	}
	dead := new(atomic.Bool)
	c.conn, c.dead = conn, dead
	go watch(conn, dead)
	return nil
}

// watch reads conn until it ends. The receiver never writes on a message
// connection, so any return from Read but a timeout means the peer (or
// the network) closed it, or Close did.
func watch(conn net.Conn, dead *atomic.Bool) {
	var buf [64]byte
	for {
		_, err := conn.Read(buf[:])
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			continue
		}
		dead.Store(true)
		return
	}
}

// Close closes the connection (its watcher ends with it).
func (c *msgConn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.conn != nil {
		_ = c.conn.Close()
	}
}

// snapConn streams one snapshot's chunks; Close ends the stream with the
// poison number and waits (bounded) for the receiver's acknowledgement.
type snapConn struct {
	conn      net.Conn
	encrypted bool
}

var _ raftio.ISnapshotConnection = (*snapConn)(nil)

// SendChunk implements raftio.ISnapshotConnection.
func (c *snapConn) SendChunk(chunk pb.Chunk) error {
	payload, err := chunk.Marshal()
	if err != nil {
		return err
	}
	return writeFrame(c.conn, methodSnapshot, payload, c.encrypted)
}

// Close implements raftio.ISnapshotConnection.
func (c *snapConn) Close() {
	defer c.conn.Close()
	if err := c.conn.SetWriteDeadline(time.Now().Add(2 * magicWait)); err != nil {
		return
	}
	if _, err := c.conn.Write(poisonNumber[:]); err != nil {
		return
	}
	var ack [len(poisonNumber)]byte
	if err := c.conn.SetReadDeadline(time.Now().Add(poisonWait)); err != nil {
		return
	}
	_, _ = io.ReadFull(c.conn, ack[:])
}
