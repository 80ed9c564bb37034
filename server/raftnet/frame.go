package raftnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"slices"
	"time"
)

// The wire format of dragonboat's TCP transport (internal/transport/tcp.go
// at the version go.mod pins), so that both transports interoperate.
var (
	magicNumber  = [2]byte{0xAE, 0x7D}
	poisonNumber = [2]byte{0x00, 0x00}
)

const (
	headerSize = 18

	methodRaft     uint16 = 100
	methodSnapshot uint16 = 200

	// MaxFrameBytes bounds one frame's payload: a message batch (dragonboat
	// caps one at 64 MiB, and one entry at as much again; lockd's entries
	// are far smaller) or a snapshot chunk (2 MiB). A header announcing
	// more closes the connection. The payload is allocated as it arrives.
	MaxFrameBytes = 128 << 20

	// MaxInboundConns bounds the Raft connections a transport serves at
	// once (each peer opens one for messages and one per snapshot stream);
	// past it a new connection is closed at once.
	MaxInboundConns = 1024

	// acceptBackoffMax bounds the pause after a failed accept (out of file
	// descriptors): the listener is retried, never given up.
	acceptBackoffMax = time.Second

	// Deadlines, as dragonboat's: the magic number is awaited in 1 s
	// rounds (a quiet connection times out and is read again), a header
	// must follow within 2 s, every piece of a payload within 5 s.
	magicWait   = time.Second
	headerWait  = 2 * time.Second
	pieceWait   = 5 * time.Second
	pieceBytes  = 2 << 20
	poisonWait  = 10 * time.Second
	dialTimeout = 5 * time.Second
	tlsTimeout  = 10 * time.Second
	keepAlive   = 10 * time.Second
)

// smallFrame: a payload up to this size is written with its magic number
// and header at once (writeFrame), within the deadlines of both
// (magicWait + headerWait + pieceWait).
const smallFrame = 64 << 10

var (
	errBadFrame = errors.New("raftnet: bad frame")
	errPoison   = errors.New("raftnet: poison received")
)

// header is a frame's header: its method, payload size and payload CRC
// (0 on an encrypted connection, where TLS checks integrity).
type header struct {
	method uint16
	size   uint64
	crc    uint32
}

// encode writes h into buf (headerSize bytes) with the header's own CRC.
func (h header) encode(buf []byte) {
	binary.BigEndian.PutUint16(buf, h.method)
	binary.BigEndian.PutUint64(buf[2:], h.size)
	binary.BigEndian.PutUint32(buf[10:], 0)
	binary.BigEndian.PutUint32(buf[14:], h.crc)
	binary.BigEndian.PutUint32(buf[10:], crc32.ChecksumIEEE(buf[:headerSize]))
}

// decodeHeader checks and decodes a header (buf is headerSize bytes and is
// left as it came).
func decodeHeader(buf []byte) (header, error) {
	want := binary.BigEndian.Uint32(buf[10:])
	binary.BigEndian.PutUint32(buf[10:], 0)
	got := crc32.ChecksumIEEE(buf[:headerSize])
	binary.BigEndian.PutUint32(buf[10:], want)
	if got != want {
		return header{}, fmt.Errorf("%w: header checksum", errBadFrame)
	}
	h := header{method: binary.BigEndian.Uint16(buf), size: binary.BigEndian.Uint64(buf[2:]), crc: binary.BigEndian.Uint32(buf[14:])}
	switch {
	case h.method != methodRaft && h.method != methodSnapshot:
		return header{}, fmt.Errorf("%w: method %d", errBadFrame, h.method)
	case h.size == 0 || h.size > MaxFrameBytes:
		return header{}, fmt.Errorf("%w: payload of %d bytes (limit %d)", errBadFrame, h.size, MaxFrameBytes)
	}
	return h, nil
}

// writeFrame writes one frame: magic number, header, payload.
func writeFrame(conn net.Conn, method uint16, payload []byte, encrypted bool) error {
	h := header{method: method, size: uint64(len(payload))}
	if !encrypted {
		h.crc = crc32.ChecksumIEEE(payload)
	}
	var head [len(magicNumber) + headerSize]byte
	copy(head[:], magicNumber[:])
	h.encode(head[len(magicNumber):])
	if len(payload) <= smallFrame {
		// Most Raft message batches: one writev, one segment (Nagle is
		// off), instead of a write for the head and one for the payload.
		if err := conn.SetWriteDeadline(time.Now().Add(magicWait + headerWait + pieceWait)); err != nil {
			return err
		}
		bufs := net.Buffers{head[:], payload}
		_, err := bufs.WriteTo(conn)
		return err
	}
	if err := conn.SetWriteDeadline(time.Now().Add(magicWait + headerWait)); err != nil {
		return err
	}
	if _, err := conn.Write(head[:]); err != nil {
		return err
	}
	for sent := 0; sent < len(payload); {
		n := min(pieceBytes, len(payload)-sent)
		if err := conn.SetWriteDeadline(time.Now().Add(pieceWait)); err != nil {
			return err
		}
		if _, err := conn.Write(payload[sent : sent+n]); err != nil {
			return err
		}
		sent += n
	}
	return nil
}

// readMagic waits one round (magicWait) for a frame's magic number:
// errPoison if the sender ends a snapshot stream, a net.Error timeout if
// the connection was quiet.
func readMagic(conn net.Conn) error {
	if err := conn.SetReadDeadline(time.Now().Add(magicWait)); err != nil {
		return err
	}
	var m [len(magicNumber)]byte
	if _, err := io.ReadFull(conn, m[:]); err != nil {
		return err
	}
	switch {
	case bytes.Equal(m[:], poisonNumber[:]):
		return errPoison
	case !bytes.Equal(m[:], magicNumber[:]):
		return fmt.Errorf("%w: magic number %x", errBadFrame, m)
	}
	return nil
}

// readFrame reads the header and payload that follow a magic number.
func readFrame(conn net.Conn, encrypted bool) (uint16, []byte, error) {
	var hb [headerSize]byte
	if err := conn.SetReadDeadline(time.Now().Add(headerWait)); err != nil {
		return 0, nil, err
	}
	if _, err := io.ReadFull(conn, hb[:]); err != nil {
		return 0, nil, err
	}
	h, err := decodeHeader(hb[:])
	if err != nil {
		return 0, nil, err
	}
	// Grown as pieces arrive, not allocated at the header's word: a
	// header costs its sender 20 bytes, the payload as many as it claims.
	size := int(h.size)
	payload := make([]byte, 0, min(size, pieceBytes))
	for len(payload) < size {
		n := min(pieceBytes, size-len(payload))
		if err := conn.SetReadDeadline(time.Now().Add(pieceWait)); err != nil {
			return 0, nil, err
		}
		payload = slices.Grow(payload, n)
		piece := payload[len(payload) : len(payload)+n]
		if _, err := io.ReadFull(conn, piece); err != nil {
			return 0, nil, err
		}
		payload = payload[:len(payload)+n]
	}
	if !encrypted && crc32.ChecksumIEEE(payload) != h.crc {
		return 0, nil, fmt.Errorf("%w: payload checksum", errBadFrame)
	}
	return h.method, payload, nil
}
