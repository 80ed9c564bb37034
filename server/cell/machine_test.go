package cell

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

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
