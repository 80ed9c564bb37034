package raftnet

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Name is the transport's name in dragonboat's logs.
const Name = "lockd-raftnet"

// Factory makes the transport for a NodeHost (its
// NodeHostConfig.Expert.TransportFactory).
type Factory struct {
	Log *slog.Logger // nil: slog.Default
}

var _ config.TransportFactory = Factory{}

// Create implements config.TransportFactory.
func (f Factory) Create(nhc config.NodeHostConfig, onBatch raftio.MessageHandler, onChunk raftio.ChunkHandler) raftio.ITransport {
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	return &Transport{cfg: nhc, onBatch: onBatch, onChunk: onChunk, encrypted: nhc.MutualTLS, log: log.With("component", "raftnet"),
		conns: map[net.Conn]struct{}{}}
}

// Validate implements config.TransportFactory: host:port, as dragonboat's.
func (Factory) Validate(addr string) bool { return config.IsValidAddress(addr) }

// Transport is one NodeHost's Raft transport.
type Transport struct {
	cfg       config.NodeHostConfig
	onBatch   raftio.MessageHandler
	onChunk   raftio.ChunkHandler
	encrypted bool
	log       *slog.Logger

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{} // accepted, open
	closed bool
	wg     sync.WaitGroup
}

var _ raftio.ITransport = (*Transport)(nil)

// Name implements raftio.ITransport.
func (t *Transport) Name() string { return Name }

// Start listens on the NodeHost's listen address (mutual TLS on the Raft
// CA when the NodeHost has it).
func (t *Transport) Start() error {
	ln, err := net.Listen("tcp", t.cfg.GetListenAddress())
	if err != nil {
		return err
	}
	tc, err := t.cfg.GetServerTLSConfig()
	if err != nil {
		_ = ln.Close()
		return err
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	t.mu.Lock()
	t.ln = ln
	t.mu.Unlock()
	t.wg.Add(1)
	go t.accept(ln)
	return nil
}

// Close stops listening, closes every accepted connection and waits for
// their readers.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	if t.ln != nil {
		_ = t.ln.Close()
	}
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}

// accept serves connections until Close. A failed accept (out of file
// descriptors, say) is retried after a pause that doubles up to
// acceptBackoffMax, as net/http does: giving up would leave the port
// open and unread, peers' writes succeeding into a queue nobody reads.
func (t *Transport) accept(ln net.Listener) {
	defer t.wg.Done()
	pause := 5 * time.Millisecond
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			t.log.Warn("raft listener: accept failed; retrying", "err", err, "in", pause)
			time.Sleep(pause)
			pause = min(2*pause, acceptBackoffMax)
			continue
		}
		pause = 5 * time.Millisecond
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			_ = conn.Close()
			return
		}
		if len(t.conns) >= MaxInboundConns {
			t.mu.Unlock()
			t.log.Warn("raft listener: too many connections; closing a new one", "remote", conn.RemoteAddr(), "limit", MaxInboundConns)
			_ = conn.Close()
			continue
		}
		t.conns[conn] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serve(conn)
	}
}

// serve reads frames from one accepted connection until it ends: message
// batches and snapshot chunks go to the NodeHost; a poison number (the
// end of a snapshot stream) is acknowledged and ends it.
func (t *Transport) serve(conn net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.conns, conn)
		t.mu.Unlock()
		_ = conn.Close()
	}()
	if tc, ok := conn.(*tls.Conn); ok {
		// Before the 1 s read rounds: a handshake that fails on a read
		// timeout fails for good.
		ctx, cancel := context.WithTimeout(context.Background(), tlsTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			t.log.Debug("raft connection refused", "remote", conn.RemoteAddr(), "err", err)
			return
		}
	}
	// Reads through a buffer: a frame's magic number, header and payload
	// (one segment from writeFrame) in one read call, not three.
	in := bufferedConn{Conn: conn, r: bufio.NewReaderSize(conn, frameReadBuffer)}
	for {
		if err := readMagic(in); err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, errPoison):
				_ = conn.SetWriteDeadline(time.Now().Add(2 * magicWait))
				_, _ = conn.Write(poisonNumber[:])
				return
			case errors.As(err, &ne) && ne.Timeout():
				continue // quiet: wait for the next frame
			}
			return
		}
		method, payload, err := readFrame(in, t.encrypted)
		if err != nil {
			t.log.Debug("raft connection dropped", "remote", conn.RemoteAddr(), "err", err)
			return
		}
		if !t.dispatch(method, payload) {
			return
		}
	}
}

// frameReadBuffer is the read buffer of one accepted connection
// (MaxInboundConns of them at most).
const frameReadBuffer = 4 << 10

// bufferedConn is a connection read through a buffer; deadlines and
// writes go to the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// dispatch hands one frame to the NodeHost; false ends the connection.
func (t *Transport) dispatch(method uint16, payload []byte) bool {
	if method == methodRaft {
		var b pb.MessageBatch
		if err := b.Unmarshal(payload); err != nil {
			return false
		}
		t.onBatch(b)
		return true
	}
	var c pb.Chunk
	if err := c.Unmarshal(payload); err != nil {
		return false
	}
	return t.onChunk(c)
}

// GetConnection implements raftio.ITransport: a message connection that
// dials again before a send if the peer closed the last one.
func (t *Transport) GetConnection(ctx context.Context, target string) (raftio.IConnection, error) {
	c := &msgConn{t: t, target: target, ctx: ctx}
	if err := c.redial(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// GetSnapshotConnection implements raftio.ITransport.
func (t *Transport) GetSnapshotConnection(ctx context.Context, target string) (raftio.ISnapshotConnection, error) {
	conn, err := t.dial(ctx, target)
	if err != nil {
		return nil, err
	}
	return &snapConn{conn: conn, encrypted: t.encrypted}, nil
}

// dial opens a connection to target (TLS-handshaken when the NodeHost has
// mutual TLS), with TCP keepalive and no linger, as dragonboat's.
func (t *Transport) dial(ctx context.Context, target string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	conn, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	cc, err := t.cfg.GetClientTLSConfig(target)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if cc == nil {
		return conn, nil
	}
	tconn := tls.Client(conn, cc)
	hctx, cancel := context.WithTimeout(ctx, tlsTimeout)
	defer cancel()
	if err := tconn.HandshakeContext(hctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tconn, nil
}
