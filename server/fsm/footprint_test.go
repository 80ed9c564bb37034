package fsm

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"unsafe"

	"github.com/lockservice/lockd/api"
)

// footprint is a state shaped like lockbench's: sessions holding lock
// nodes (one per lock directory) and ephemeral members (in memberGroups
// directories), persistent values of valueBytes, and small persistent
// nodes of smallBytes (in smallDirs directories).
type footprint struct {
	name                   string
	sessions               int
	locks, members, values int
	valueBytes             int
	small, smallBytes      int
}

const (
	memberGroups = 500 // lockbench's members/g%d directories
	smallDirs    = 100 // directories holding the small nodes
	ackLag       = 16  // requests a footprint session leaves unacked
	maxFootprint = 2e5 // a footprint's nodes, at most (a named bound)
	memberValue  = "host-0000.example:8080"
)

var heapProfileDir = flag.String("fsm.heapprofile", "", "TestStateFootprint writes each footprint's heap profile, state alive, to DIR/NAME.prof")

// footprints are the two states: the spec's (lockbench state's
// defaults) and 100 k nodes.
var footprints = []footprint{
	{name: "spec", sessions: 16, locks: 20_000, members: 50_000, values: 30_000, valueBytes: 1024},
	{name: "100k", sessions: 1, values: 30_000, valueBytes: 1024, small: 70_000, smallBytes: 32},
}

// footprintBuilder applies a footprint's commands as the cell would: each
// write on a session with a request id and an ack, through ApplyEntry.
type footprintBuilder struct {
	tb     testing.TB
	s      *State
	idx    uint64
	sess   []uint64
	nextRQ []uint64
}

func (b *footprintBuilder) apply(c Command) Result {
	b.idx++
	a := b.s.ApplyEntry(b.idx, c.Encode())
	if a.Result.Err != nil {
		b.tb.Fatalf("footprint %s %s: %v", c.Op, c.Path, a.Result.Err)
	}
	return a.Result
}

// write applies c on the i-th session (round robin) with its next request.
func (b *footprintBuilder) write(i int, c Command) {
	k := i % len(b.sess)
	b.nextRQ[k]++
	c.Session, c.Secret, c.Request = b.sess[k], "s", b.nextRQ[k]
	if b.nextRQ[k] > ackLag {
		c.Ack = b.nextRQ[k] - ackLag
	}
	b.apply(c)
}

// buildFootprint applies f to a new state and returns it.
func buildFootprint(tb testing.TB, f footprint) *State {
	tb.Helper()
	if f.locks+f.members+f.values+f.small > maxFootprint {
		tb.Fatalf("footprint %s is over %d nodes", f.name, int(maxFootprint))
	}
	b := &footprintBuilder{tb: tb, s: New()}
	b.apply(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1})
	b.apply(ensureCmd("/demo", 1))
	for range f.sessions {
		b.sess = append(b.sess, b.apply(Command{Op: OpOpenSession, WriteHeader: api.WriteHeader{Secret: "s"}}).Session)
		b.nextRQ = append(b.nextRQ, 0)
	}
	base := "/demo/lockbench/run-0001/state"
	for i := range f.locks {
		b.write(i, Command{Op: OpCreate, Path: fmt.Sprintf("%s/locks/l%d/lock-x-", base, i), Ephemeral: true, Sequential: true, Lock: api.LockExclusive, MakeParents: true})
	}
	for j := range f.members {
		b.write(j, Command{Op: OpCreate, Path: fmt.Sprintf("%s/members/g%d/m%d", base, j%memberGroups, j), Value: []byte(memberValue), Ephemeral: true, MakeParents: true})
	}
	value := bytes.Repeat([]byte("v"), f.valueBytes)
	for i := range f.values {
		b.write(i, Command{Op: OpPut, Path: fmt.Sprintf("%s/values/v%d", base, i), Value: value, MakeParents: true})
	}
	smallValue := bytes.Repeat([]byte("s"), f.smallBytes)
	for i := range f.small {
		b.write(i, Command{Op: OpPut, Path: fmt.Sprintf("%s/small/d%03d/n%d", base, i%smallDirs, i), Value: smallValue, MakeParents: true})
	}
	if err := b.s.CheckInvariants(); err != nil {
		tb.Fatal(err)
	}
	return b.s
}

// heapInuse is HeapInuse after two collections.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestStateFootprint reports what each footprint's state holds on the heap:
// HeapInuse after GC with the state built, less before, and that per node
// and per byte of data (paths and values). Not in -short; run it with
// `go test -run TestStateFootprint -v ./server/fsm/` (and -memprofile for
// the heap by type).
func TestStateFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds states of 100 k nodes")
	}
	for _, f := range footprints {
		t.Run(f.name, func(t *testing.T) {
			before := heapInuse()
			s := buildFootprint(t, f)
			after := heapInuse()
			held := int64(after) - int64(before)
			t.Logf("%s: %d nodes, %d sessions, data %.1f MB; HeapInuse +%.1f MB, %d B/node, %.2f× data",
				f.name, s.NumNodes(), s.NumSessions(), float64(s.bytes)/1e6, float64(held)/1e6,
				held/int64(s.NumNodes()), float64(held)/float64(s.bytes))
			writeHeapProfile(t, f.name)
			runtime.KeepAlive(s)
		})
	}
}

// writeHeapProfile writes the heap profile as of the last GC to
// -fsm.heapprofile's directory, if set.
func writeHeapProfile(t *testing.T, name string) {
	if *heapProfileDir == "" {
		return
	}
	out, err := os.Create(filepath.Join(*heapProfileDir, name+".prof"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
		t.Fatal(err)
	}
}

// maxNodeSize is the node layout's size class (nodes.go): a field added
// past it costs every node of a big cell the next class up.
const maxNodeSize = 224

// TestNodeLayout keeps the node struct within its size class.
func TestNodeLayout(t *testing.T) {
	if got := unsafe.Sizeof(node{}); got > maxNodeSize {
		t.Fatalf("node is %d bytes, over %d", got, maxNodeSize)
	}
}
