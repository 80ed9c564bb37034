package cell

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/lockservice/lockd/server/fsm"
)

// garbageAfterEOF mimics dragonboat's snapshot block reader: after it has
// returned io.EOF, the next Read returns a block of NUL bytes and no error.
type garbageAfterEOF struct {
	r    io.Reader
	eofs int
}

func (g *garbageAfterEOF) Read(p []byte) (int, error) {
	if g.eofs > 0 {
		clear(p)
		return len(p), nil
	}
	n, err := g.r.Read(p)
	if err == io.EOF {
		g.eofs++
	}
	return n, err
}

func TestRecoverIgnoresReadsAfterEOF(t *testing.T) {
	s := fsm.New()
	s.Apply(1, (&fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: 1, Term: 1}).Encode())
	s.Apply(2, (&fsm.Command{Op: fsm.OpEnsurePrefix, Path: "/demo", Epoch: 1}).Encode())
	for i := uint64(3); i < 3000; i++ {
		s.Apply(i, (&fsm.Command{Op: fsm.OpPut, Path: "/demo/k" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)), Value: bytes.Repeat([]byte("v"), 1500)}).Encode())
	}
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	// Like dragonboat, deliver the last data together with io.EOF, then
	// garbage. (The end-to-end case, a restart from a snapshot over one
	// 2 MiB block, is TestSnapshotCatchUpAndRestart.)
	reader := func() io.Reader { return &garbageAfterEOF{r: iotest.DataErrReader(bytes.NewReader(buf.Bytes()))} }
	m := &machine{cell: &Cell{}, state: fsm.New()}
	if err := m.RecoverFromSnapshot(reader(), nil, nil); err != nil {
		t.Fatalf("recover: %v", err)
	}
	var again bytes.Buffer
	if err := m.state.WriteSnapshot(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Fatal("restored state differs")
	}
}

// blockingWriter takes the first write, then blocks every later one until
// released: a snapshot stuck on a slow disk.
type blockingWriter struct {
	buf     bytes.Buffer
	writes  int
	started chan struct{}
	release chan struct{}
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.writes++
	if b.writes == 2 {
		close(b.started)
		<-b.release
	}
	return b.buf.Write(p)
}

// A snapshot being written does not hold up applies (the concurrent state
// machine), and what it writes is the state at PrepareSnapshot.
func TestSnapshotDoesNotBlockUpdates(t *testing.T) {
	r := newTestReplica(t, 1, nil)
	r.apply(fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: 9, Term: 1})
	r.apply(fsm.Command{Op: fsm.OpEnsurePrefix, Path: "/demo", Epoch: 1})
	value := bytes.Repeat([]byte("v"), 1000)
	for i := 0; i < 3000; i++ { // several 64 KiB buffer flushes, several node batches
		r.apply(fsm.Command{Op: fsm.OpPut, Path: fmt.Sprintf("/demo/k%04d", i), Value: value})
	}
	var want bytes.Buffer
	if err := r.m.state.WriteSnapshot(&want); err != nil {
		t.Fatal(err)
	}
	ctx, err := r.m.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	w := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	saved := make(chan error, 1)
	go func() { saved <- r.m.SaveSnapshot(ctx, w, nil, nil) }()
	select {
	case <-w.started:
	case err := <-saved:
		t.Fatalf("snapshot finished before blocking: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("snapshot never wrote")
	}
	// The writer is stuck; applies must go on.
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		r.apply(fsm.Command{Op: fsm.OpPut, Path: "/demo/k0000", Value: []byte("changed")})
		r.apply(fsm.Command{Op: fsm.OpDelete, Path: "/demo/k0001"})
		r.apply(fsm.Command{Op: fsm.OpPut, Path: "/demo/new", Value: []byte("new")})
	}()
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		close(w.release)
		t.Fatal("applies blocked behind the snapshot being written")
	}
	close(w.release)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.buf.Bytes(), want.Bytes()) {
		t.Fatal("the snapshot is not the state at PrepareSnapshot")
	}
}
