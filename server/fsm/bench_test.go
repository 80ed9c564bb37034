package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/lockservice/lockd/api"
)

const (
	benchDirs    = 100
	benchPerDir  = 1000 // benchDirs*benchPerDir ≈ 100k nodes
	benchValueSz = 32
)

// benchState builds a state with ~100k persistent nodes with small values
// under /bench, plus a live session. It applies directly (no per-entry
// invariant check, which is O(nodes)) and checks once at the end.
func benchState(b *testing.B) (*State, uint64) {
	b.Helper()
	s := New()
	idx := uint64(0)
	apply := func(c Command) Result {
		idx++
		out, _ := s.Apply(idx, c.Encode())
		r, err := DecodeResult(out)
		if err != nil || r.Err != nil {
			b.Fatalf("setup %s %s: %v %v", c.Op, c.Path, err, r.Err)
		}
		return r
	}
	apply(ensureCmd("/bench", 1))
	sess := apply(Command{Op: OpOpenSession}).Session
	val := bytes.Repeat([]byte{'v'}, benchValueSz)
	for d := range benchDirs {
		dir := fmt.Sprintf("/bench/d%03d", d)
		apply(createCmd(dir))
		for i := range benchPerDir {
			apply(Command{Op: OpCreate, Path: fmt.Sprintf("%s/n%04d", dir, i), Value: val})
		}
	}
	apply(createCmd("/bench/hot"))
	apply(createCmd("/bench/locks"))
	if err := s.CheckInvariants(); err != nil {
		b.Fatal(err)
	}
	return s, sess
}

// BenchmarkApplyCreateDelete: one op is a create and a delete applied to a
// ~100k-node state (two log entries). SetBytes is the encoded entries' size.
func BenchmarkApplyCreateDelete(b *testing.B) {
	b.Run("persistent", func(b *testing.B) {
		s, _ := benchState(b)
		create := (&Command{Op: OpCreate, Path: "/bench/hot/n", Value: bytes.Repeat([]byte{'v'}, benchValueSz)}).Encode()
		del := (&Command{Op: OpDelete, Path: "/bench/hot/n"}).Encode()
		b.SetBytes(int64(len(create) + len(del)))
		b.ReportAllocs()
		idx := s.Index()
		b.ResetTimer()
		for range b.N {
			idx++
			s.Apply(idx, create)
			idx++
			s.Apply(idx, del)
		}
		b.StopTimer()
		b.ReportMetric(float64(s.NumNodes()), "nodes")
	})
	// A deduplicated lock create (session + request id + ack) and its delete:
	// the path a lock client takes. Encoding the entries is included.
	b.Run("lock-dedupe", func(b *testing.B) {
		s, sess := benchState(b)
		idx := s.Index()
		var n int64
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			id := uint64(i + 1)
			create := lockCmd(sess, "/bench/locks", api.LockExclusive)
			create.WriteHeader = api.WriteHeader{Session: sess, Request: id, Ack: id}
			cb := create.Encode()
			db := (&Command{Op: OpDelete, Path: fmt.Sprintf("/bench/locks/lock-%010d", i), Admin: true}).Encode()
			n += int64(len(cb) + len(db))
			idx++
			s.Apply(idx, cb)
			idx++
			s.Apply(idx, db)
		}
		b.StopTimer()
		b.SetBytes(n / int64(b.N))
		if s.NumNodes() != benchDirs*(benchPerDir+1)+3 {
			b.Fatalf("%d nodes: the deletes missed", s.NumNodes())
		}
	})
}

// BenchmarkSnapshot writes and reads a snapshot of ~100k nodes; SetBytes is
// the snapshot's size, so MB/s is snapshot throughput.
func BenchmarkSnapshot(b *testing.B) {
	s, _ := benchState(b)
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		b.Fatal(err)
	}
	snap := append([]byte(nil), buf.Bytes()...)
	// freeze is what the concurrent snapshot holds applies for.
	b.Run("freeze", func(b *testing.B) {
		b.ReportAllocs()
		b.ReportMetric(float64(s.NumNodes()), "nodes")
		for range b.N {
			s.Freeze()
		}
	})
	b.Run("write", func(b *testing.B) {
		b.SetBytes(int64(len(snap)))
		b.ReportAllocs()
		b.ReportMetric(float64(s.NumNodes()), "nodes")
		for range b.N {
			buf.Reset()
			if err := s.WriteSnapshot(&buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		b.SetBytes(int64(len(snap)))
		b.ReportAllocs()
		b.ReportMetric(float64(s.NumNodes()), "nodes")
		for range b.N {
			if _, err := ReadSnapshot(bytes.NewReader(snap)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
