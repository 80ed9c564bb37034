package raftnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"sync"
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
	end    *connEnd // the current conn's end, filled in by its watcher
	closed bool
}

// connEnd is what a message connection's watcher saw when it ended.
type connEnd struct {
	refusal error         // written before ended closes: the peer refused this node's certificate
	ended   chan struct{} // closed when the connection ended
}

func newConnEnd() *connEnd { return &connEnd{ended: make(chan struct{})} }

// end records how the connection ended (refusal nil: closed).
func (e *connEnd) end(refusal error) {
	e.refusal = refusal
	close(e.ended)
}

// dead reports whether the connection has ended.
func (e *connEnd) dead() bool {
	select {
	case <-e.ended:
		return true
	default:
		return false
	}
}

// refusalWait bounds how long a failed write waits for its connection's
// watcher to say whether the peer refused this node's certificate.
const refusalWait = 250 * time.Millisecond

// refusalWithin is the connection's refusal once its watcher has seen
// it end, waiting at most d; nil if it ended otherwise or not yet.
func (e *connEnd) refusalWithin(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-e.ended:
		return e.refusal
	case <-t.C:
		return nil
	}
}

// ErrRefused: a peer's TLS alert about this node's certificate ended the
// connection: the peer refused the certificate (signed by another CA, expired, revoked by a re-key).
// With TLS 1.3 the client's handshake completes before the server has
// checked the client's certificate, so the dial succeeded and only the
// watcher sees the refusal.
var ErrRefused = errors.New("the Raft peer refused this node's TLS certificate")

var _ raftio.IConnection = (*msgConn)(nil)

// SendMessageBatch writes the batch, first dialing again if the peer
// closed the connection since the last write (it restarted): the batch
// reaches the new process instead of a closed socket. A peer that refused
// this node's certificate is not dialed again: the send fails
// (ErrRefused), as a write on dragonboat's own transport would.
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
	if end := c.end; end.dead() && !mutant.On(mutant.StaleConn) {
		if end.refusal != nil && !mutant.On(mutant.RefusedRedial) {
			// Every later send too: dragonboat closes this connection
			// and dials again through its circuit breaker, not once per
			// batch.
			return end.refusal
		}
		ctx, cancel := context.WithTimeout(c.ctx, dialTimeout)
		err := c.redialLocked(ctx)
		cancel()
		if err != nil {
			return err
		}
	}
	err = writeFrame(c.conn, methodRaft, payload, c.t.encrypted)
	if err != nil {
		// A peer that refused the certificate fails the write with its
		// reset (a broken pipe), which arrives after its alert: the
		// watcher reads the alert, and the error says why.
		if r := c.end.refusalWithin(refusalWait); r != nil {
			return r
		}
	}
	return err
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
		c.end = newConnEnd()
		c.end.end(nil)
		return err
	}
	c.useLocked(conn)
	return nil
}

// useLocked makes conn the connection and starts its watcher.
func (c *msgConn) useLocked(conn net.Conn) {
	c.conn, c.end = conn, newConnEnd()
	go watch(conn, c.end, c.t.log.With("peer", c.target))
}

// watch reads conn until it ends. The receiver never writes on a message
// connection, so any return from Read but a timeout means the peer (or
// the network) closed it, or Close did; a TLS alert about a certificate
// means the peer refused this node's.
func watch(conn net.Conn, end *connEnd, log *slog.Logger) {
	var buf [64]byte
	for {
		_, err := conn.Read(buf[:])
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			continue
		}
		var refusal error
		if isCertRefusal(err) {
			refusal = fmt.Errorf("%w: %w", ErrRefused, err)
			log.Warn("raft peer refused this node's certificate", "err", err)
		}
		end.end(refusal)
		return
	}
}

// isCertRefusal reports whether err is a TLS alert in which the peer
// refused this node's certificate. crypto/tls reports a peer's alert as a
// net.OpError "remote error" whose Err is its unexported alert type, a
// uint8 (its close_notify is io.EOF instead); other alerts (a record
// that failed its MAC, say) end the connection like a close.
func isCertRefusal(err error) bool {
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "remote error" {
		return false
	}
	v := reflect.ValueOf(oe.Err)
	return v.Kind() == reflect.Uint8 && certAlerts[v.Uint()]
}

// certAlerts are the TLS alerts about a certificate (RFC 8446, 6.2):
// bad_certificate, unsupported_certificate, certificate_revoked,
// certificate_expired, certificate_unknown, unknown_ca, access_denied and
// certificate_required.
var certAlerts = map[uint64]bool{42: true, 43: true, 44: true, 45: true, 46: true, 48: true, 49: true, 116: true}

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
