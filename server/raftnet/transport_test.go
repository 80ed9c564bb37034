package raftnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/lockservice/lockd/internal/tlsutil"
)

const testWait = 10 * time.Second

// inbox records what a transport received.
type inbox struct {
	mu      sync.Mutex
	batches []pb.MessageBatch
	chunks  []pb.Chunk
	got     chan struct{}
}

func newInbox() *inbox { return &inbox{got: make(chan struct{}, 64)} }

func (b *inbox) onBatch(m pb.MessageBatch) {
	b.mu.Lock()
	b.batches = append(b.batches, m)
	b.mu.Unlock()
	b.got <- struct{}{}
}

func (b *inbox) onChunk(c pb.Chunk) bool {
	b.mu.Lock()
	b.chunks = append(b.chunks, c)
	b.mu.Unlock()
	b.got <- struct{}{}
	return true
}

// wait reports whether something arrived within d.
func (b *inbox) wait(d time.Duration) bool {
	select {
	case <-b.got:
		return true
	case <-time.After(d):
		return false
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func start(t *testing.T, nhc config.NodeHostConfig, in *inbox) *Transport {
	t.Helper()
	tr := Factory{}.Create(nhc, in.onBatch, in.onChunk).(*Transport)
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	return tr
}

func batch(id uint64) pb.MessageBatch {
	return pb.MessageBatch{DeploymentId: 7, SourceAddress: "a", Requests: []pb.Message{{Type: pb.Heartbeat, ShardID: 1, From: 1, To: 2, Term: id}}}
}

func TestMessagesAndChunksArrive(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plain", false}, {"mutual TLS", true}} {
		t.Run(tc.name, func(t *testing.T) {
			addrA, addrB := freeAddr(t), freeAddr(t)
			cfgA, cfgB := config.NodeHostConfig{RaftAddress: addrA}, config.NodeHostConfig{RaftAddress: addrB}
			if tc.tls {
				dir := t.TempDir()
				f, err := tlsutil.DevRaftCA(dir, []string{"127.0.0.1", "localhost"})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []*config.NodeHostConfig{&cfgA, &cfgB} {
					c.MutualTLS, c.CAFile, c.CertFile, c.KeyFile = true, f.CA, f.Cert, f.Key
				}
			}
			inA, inB := newInbox(), newInbox()
			a, b := start(t, cfgA, inA), start(t, cfgB, inB)
			defer a.Close()
			defer b.Close()
			ctx := context.Background()
			c, err := a.GetConnection(ctx, addrB)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.SendMessageBatch(batch(3)); err != nil {
				t.Fatal(err)
			}
			if !inB.wait(testWait) {
				t.Fatal("batch not received")
			}
			if got := inB.batches[0]; got.DeploymentId != 7 || len(got.Requests) != 1 || got.Requests[0].Term != 3 {
				t.Fatalf("received %+v", got)
			}
			sc, err := a.GetSnapshotConnection(ctx, addrB)
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("s"), 3*pieceBytes+5) // several pieces
			if err := sc.SendChunk(pb.Chunk{ShardID: 1, ChunkId: 0, ChunkCount: 1, Data: data}); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { sc.Close(); close(done) }() // poison, then its ack
			if !inB.wait(testWait) {
				t.Fatal("chunk not received")
			}
			select {
			case <-done:
			case <-time.After(testWait):
				t.Fatal("the snapshot stream's end was not acknowledged")
			}
			inB.mu.Lock()
			defer inB.mu.Unlock()
			if len(inB.chunks) != 1 || !bytes.Equal(inB.chunks[0].Data, data) {
				t.Fatalf("chunk received wrong: %d chunks", len(inB.chunks))
			}
		})
	}
}

// TestFirstMessageAfterPeerRestartArrives: the peer's process ends (its
// transport closes, as on kill -9) and a new one listens on its address;
// the first batch sent on the connection made to the old one reaches the
// new one. dragonboat's own transport writes it into the closed socket,
// and loses it: the lost first vote after a peer's restart (issue 23).
// Mutant: lockd_broken_staleconn.
func TestFirstMessageAfterPeerRestartArrives(t *testing.T) {
	addrA, addrB := freeAddr(t), freeAddr(t)
	inA, inB := newInbox(), newInbox()
	a := start(t, config.NodeHostConfig{RaftAddress: addrA}, inA)
	defer a.Close()
	b := start(t, config.NodeHostConfig{RaftAddress: addrB}, inB)
	c, err := a.GetConnection(context.Background(), addrB)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendMessageBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	if !inB.wait(testWait) {
		t.Fatal("first batch not received")
	}
	b.Close()                 // the peer's process ends
	waitDead(t, c.(*msgConn)) // the close reaches the sender
	inB2 := newInbox()
	b2 := start(t, config.NodeHostConfig{RaftAddress: addrB}, inB2)
	defer b2.Close()
	if err := c.SendMessageBatch(batch(2)); err != nil {
		t.Fatalf("send after the restart: %v", err)
	}
	if !inB2.wait(2 * time.Second) {
		t.Fatal("the first batch after the peer's restart was lost")
	}
	if got := inB2.batches[0].Requests[0].Term; got != 2 {
		t.Fatalf("received term %d", got)
	}
}

// TestWireFormat: a frame as dragonboat's transport writes it (magic
// number, method, size, header CRC over the header with that field zero,
// payload CRC) is read back; a corrupt or oversized header is refused.
func TestWireFormat(t *testing.T) {
	payload := []byte("hello")
	var want bytes.Buffer
	want.Write([]byte{0xAE, 0x7D})
	h := make([]byte, 18)
	binary.BigEndian.PutUint16(h, 100)
	binary.BigEndian.PutUint64(h[2:], 5)
	binary.BigEndian.PutUint32(h[14:], crc32.ChecksumIEEE(payload))
	binary.BigEndian.PutUint32(h[10:], crc32.ChecksumIEEE(h))
	want.Write(h)
	want.Write(payload)

	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, want.Len())
		n := 0
		for n < len(buf) {
			m, err := server.Read(buf[n:])
			if err != nil {
				break
			}
			n += m
		}
		got <- buf[:n]
	}()
	if err := writeFrame(client, methodRaft, payload, false); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("frame %x, want %x", b, want.Bytes())
	}
	hb := want.Bytes()[2:20]
	if hd, err := decodeHeader(append([]byte(nil), hb...)); err != nil || hd.method != methodRaft || hd.size != 5 {
		t.Fatalf("decode: %+v %v", hd, err)
	}
	bad := append([]byte(nil), hb...)
	bad[3] ^= 1
	if _, err := decodeHeader(bad); !errors.Is(err, errBadFrame) {
		t.Fatalf("corrupt header: %v", err)
	}
	big := make([]byte, 18)
	binary.BigEndian.PutUint16(big, methodSnapshot)
	binary.BigEndian.PutUint64(big[2:], MaxFrameBytes+1)
	binary.BigEndian.PutUint32(big[10:], crc32.ChecksumIEEE(big))
	if _, err := decodeHeader(big); !errors.Is(err, errBadFrame) {
		t.Fatalf("oversized frame: %v", err)
	}
}
