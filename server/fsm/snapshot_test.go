package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// snapFixture is a small state with every kind of thing a snapshot holds.
func snapFixture(t testing.TB) *harness {
	h := newDemo(t)
	s1, s2 := h.open(), h.open()
	h.ok(createCmd("/demo/l"))
	h.ok(lockCmd(s1, "/demo/l", ex))
	h.ok(lockCmd(s2, "/demo/l", sh))
	h.ok(req(ephCmd(s2, "/demo/e"), s2, 1, 0))
	h.ok(putCmd("/demo/l", "value", nil))
	s3 := h.open()
	h.ok(closeCmd(s3))
	return h
}

// rawSnap encodes a hand-made snapshot (counts filled in from the slices).
func rawSnap(t *testing.T, hdr snapHeader, sessions []snapSession, nodes []snapNode) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if hdr.Format == 0 {
		hdr.Format = snapshotFormat
	}
	if hdr.Sessions == 0 {
		hdr.Sessions = len(sessions)
	}
	if hdr.Nodes == 0 {
		hdr.Nodes = len(nodes)
	}
	for _, v := range []any{hdr} {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range sessions {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range nodes {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// readNoPanic runs ReadSnapshot, turning a panic into a test failure.
func readNoPanic(t *testing.T, b []byte) (s *State, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("ReadSnapshot panicked: %v\ninput: %q", r, b)
		}
	}()
	return ReadSnapshot(bytes.NewReader(b))
}

func TestSnapshotEmptyState(t *testing.T) {
	s := New()
	b := snapBytes(t, s)
	rs := restore(t, b)
	if !bytes.Equal(b, snapBytes(t, rs)) || rs.NumNodes() != 0 || rs.NumSessions() != 0 {
		t.Fatal("empty state round trip")
	}
	// A restored empty state accepts the first entry.
	h := harnessOn(t, rs)
	h.ok(ensureCmd("/demo", 1))
}

func TestSnapshotTruncated(t *testing.T) {
	b := snapFixture(t).snap()
	if b[len(b)-1] != '\n' {
		t.Fatal("snapshot does not end in a newline")
	}
	// Every cut but dropping the final newline loses something.
	for i := 0; i < len(b)-1; i++ {
		if _, err := readNoPanic(t, b[:i]); err == nil {
			t.Fatalf("snapshot cut to %d of %d bytes was accepted", i, len(b))
		}
	}
	if _, err := readNoPanic(t, b[:len(b)-1]); err != nil {
		t.Fatalf("without the final newline: %v", err)
	}
}

func TestSnapshotTrailingData(t *testing.T) {
	b := snapFixture(t).snap()
	for _, extra := range []string{"{}", "x", "\n{\"p\":\"/demo/z\",\"ver\":1}\n", "null", "0"} {
		if _, err := readNoPanic(t, append(append([]byte(nil), b...), extra...)); err == nil {
			t.Errorf("trailing %q accepted", extra)
		}
	}
	// Twice the snapshot is trailing data too.
	if _, err := readNoPanic(t, append(append([]byte(nil), b...), b...)); err == nil {
		t.Error("doubled snapshot accepted")
	}
}

// A byte flipped into something that is not JSON, anywhere, is an error.
func TestSnapshotGarbled(t *testing.T) {
	b := snapFixture(t).snap()
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] = 0x01
		if _, err := readNoPanic(t, c); err == nil {
			t.Fatalf("control byte at %d accepted: %q", i, c)
		}
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	root := snapNode{Path: "/demo", Version: 1, CreateIndex: 1, ModifyIndex: 1, ChildIndex: 2, DirEpoch: 1}
	kid := snapNode{Path: "/demo/a", Version: 1, CreateIndex: 2, ModifyIndex: 2, ChildIndex: 2}
	sess := snapSession{ID: 5, LeaseMS: 1000}
	eph := snapNode{Path: "/demo/e", Version: 1, CreateIndex: 6, ModifyIndex: 6, ChildIndex: 7, Ephemeral: true, Owner: 5}
	lock := func(p string, seq uint64) snapNode {
		return snapNode{Path: p, Version: 1, CreateIndex: 8, ModifyIndex: 8, ChildIndex: 8, Ephemeral: true, Owner: 5, Lock: api.LockExclusive, Seq: seq}
	}
	good := rawSnap(t, snapHeader{Index: 10, RootChild: 1}, []snapSession{sess}, []snapNode{root, kid, eph})
	if _, err := readNoPanic(t, good); err != nil {
		t.Fatalf("the good base is refused: %v", err)
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"not json", []byte("hello")},
		{"header only, counts unmet", rawSnap(t, snapHeader{Index: 1, Sessions: 1, Nodes: 1}, nil, nil)},
		{"wrong format", rawSnap(t, snapHeader{Format: 2}, nil, nil)},
		{"header not an object", []byte("[1]\n")},
		{"session with wrong types", []byte(`{"format":1,"sessions":1}` + "\n" + `{"id":"x"}` + "\n")},
		{"node before its parent", rawSnap(t, snapHeader{}, nil, []snapNode{kid, root})},
		{"ephemeral of unknown session", rawSnap(t, snapHeader{}, nil, []snapNode{root, eph})},
		{"relative node path", rawSnap(t, snapHeader{}, nil, []snapNode{{Path: "x", Version: 1}})},
		{"empty node path", rawSnap(t, snapHeader{}, nil, []snapNode{{Version: 1}})},
		{"root as a node", rawSnap(t, snapHeader{}, nil, []snapNode{{Path: "/", Version: 1}})},
		{"node path with empty segment", rawSnap(t, snapHeader{}, nil, []snapNode{root, {Path: "/demo//a", Version: 1}})},
		{"duplicate node", rawSnap(t, snapHeader{}, nil, []snapNode{root, kid, kid})},
		{"duplicate session", rawSnap(t, snapHeader{}, []snapSession{sess, sess}, []snapNode{root})},
		{"child of an ephemeral", rawSnap(t, snapHeader{}, []snapSession{sess}, []snapNode{root, eph, {Path: "/demo/e/x", Version: 1}})},
		{"two lock nodes with one sequence number", rawSnap(t, snapHeader{}, []snapSession{sess}, []snapNode{root, lock("/demo/l1", 3), lock("/demo/l2", 3)})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := readNoPanic(t, tt.b); err == nil {
				t.Fatalf("accepted: %s", tt.b)
			}
		})
	}
}

// The writer's errors are the destination's.
func TestWriteSnapshotError(t *testing.T) {
	h := snapFixture(t)
	for i := 0; i < 200; i++ { // more than the 64 KiB buffer
		h.ok(Command{Op: OpCreate, Path: "/demo/big-", Sequential: true, Value: bytes.Repeat([]byte{'x'}, 1024)})
	}
	want := errors.New("disk full")
	if err := h.s.WriteSnapshot(failWriter{want}); !errors.Is(err, want) {
		t.Fatalf("WriteSnapshot to a failing writer: %v", err)
	}
	small := New()
	if err := small.WriteSnapshot(failWriter{want}); !errors.Is(err, want) {
		t.Fatalf("small snapshot (error at flush): %v", err)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

// The snapshot is a stream of JSON values, one a line, in the documented
// order: header, sessions by id, nodes by path.
func TestSnapshotLayout(t *testing.T) {
	h := snapFixture(t)
	dec := json.NewDecoder(bytes.NewReader(h.snap()))
	var hdr snapHeader
	if err := dec.Decode(&hdr); err != nil {
		t.Fatal(err)
	}
	if hdr.Format != snapshotFormat || hdr.Index != h.idx || hdr.Sessions != h.s.NumSessions() || hdr.Nodes != h.s.NumNodes() || len(hdr.Ended) != 1 {
		t.Fatalf("header %+v", hdr)
	}
	var last uint64
	for range hdr.Sessions {
		var ss snapSession
		if err := dec.Decode(&ss); err != nil || ss.ID <= last {
			t.Fatalf("session %+v after %d: %v", ss, last, err)
		}
		last = ss.ID
	}
	prev := ""
	for range hdr.Nodes {
		var sn snapNode
		if err := dec.Decode(&sn); err != nil || strings.Compare(sn.Path, prev) <= 0 {
			t.Fatalf("node %q after %q: %v", sn.Path, prev, err)
		}
		prev = sn.Path
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		t.Fatalf("after the nodes: %v", err)
	}
}
