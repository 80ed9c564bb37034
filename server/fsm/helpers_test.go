package fsm

import (
	"bytes"
	"encoding/json"
	"flag"
	"sort"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

var seedFlag = flag.Int64("fsm.seed", 0, "seed for generated logs (0: time-based)")

// testSeed returns the seed for a generated log and logs it so a failure can
// be replayed with -fsm.seed.
func testSeed(tb testing.TB) int64 {
	tb.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	tb.Logf("seed %d (replay with -fsm.seed=%d)", seed, seed)
	return seed
}

// harness applies commands to a State at increasing indices, decodes the
// results and checks the invariants after every apply.
type harness struct {
	tb      testing.TB
	s       *State
	idx     uint64
	raw     []byte   // encoded result of the last apply
	changes []Change // changes of the last apply
}

func newHarness(tb testing.TB) *harness {
	return &harness{tb: tb, s: New()}
}

// harnessOn continues applying on an existing state (say, a restored one).
func harnessOn(tb testing.TB, s *State) *harness {
	return &harness{tb: tb, s: s, idx: s.Index()}
}

// newDemo returns a harness whose state serves the prefix /demo (epoch 1)
// and has had one leader_start (leader epoch 1).
func newDemo(tb testing.TB) *harness {
	tb.Helper()
	h := newHarness(tb)
	h.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1})
	h.ok(ensureCmd("/demo", 1))
	return h
}

func (h *harness) applyBytes(data []byte) Result {
	h.tb.Helper()
	h.idx++
	held := h.s.heldLockNodes() // rwlock.go: a holder never stops holding for another's change
	h.raw, h.changes = h.s.Apply(h.idx, data)
	if err := h.s.CheckInvariants(); err != nil {
		h.tb.Fatalf("index %d: invariants broken: %v", h.idx, err)
	}
	if err := h.s.checkStillHeld(held); err != nil {
		h.tb.Fatalf("index %d: %v", h.idx, err)
	}
	if h.s.Index() != h.idx {
		h.tb.Fatalf("index %d: state index %d", h.idx, h.s.Index())
	}
	r, err := DecodeResult(h.raw)
	if err != nil {
		h.tb.Fatalf("index %d: decode result %q: %v", h.idx, h.raw, err)
	}
	return r
}

func (h *harness) apply(c Command) Result {
	h.tb.Helper()
	return h.applyBytes(c.Encode())
}

// ok applies c and fails the test if it was refused.
func (h *harness) ok(c Command) Result {
	h.tb.Helper()
	r := h.apply(c)
	if r.Err != nil {
		h.tb.Fatalf("index %d: %s %s: unexpected error %v", h.idx, c.Op, c.Path, r.Err)
	}
	if r.Index != h.idx {
		h.tb.Fatalf("index %d: result index %d", h.idx, r.Index)
	}
	return r
}

// fail applies c and fails the test unless it was refused with code.
func (h *harness) fail(c Command, code api.Code) Result {
	h.tb.Helper()
	r := h.apply(c)
	if got := errCode(r); got != code {
		h.tb.Fatalf("index %d: %s %q: got code %q (%v), want %q", h.idx, c.Op, c.Path, got, r.Err, code)
	}
	if len(h.changes) != 0 {
		h.tb.Fatalf("index %d: refused command reported changes %v", h.idx, h.changes)
	}
	return r
}

func (h *harness) open() uint64 {
	h.tb.Helper()
	r := h.ok(Command{Op: OpOpenSession})
	if r.Session != h.idx {
		h.tb.Fatalf("session id %d, want the open index %d", r.Session, h.idx)
	}
	return r.Session
}

func (h *harness) leaderStart() uint64 {
	h.tb.Helper()
	return h.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: h.idx}).Epoch
}

func (h *harness) snap() []byte {
	h.tb.Helper()
	return snapBytes(h.tb, h.s)
}

func errCode(r Result) api.Code {
	if r.Err == nil {
		return ""
	}
	return r.Err.Code
}

func snapBytes(tb testing.TB, s *State) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		tb.Fatalf("WriteSnapshot: %v", err)
	}
	return buf.Bytes()
}

func restore(tb testing.TB, b []byte) *State {
	tb.Helper()
	s, err := ReadSnapshot(bytes.NewReader(b))
	if err != nil {
		tb.Fatalf("ReadSnapshot: %v", err)
	}
	if err := s.CheckInvariants(); err != nil {
		tb.Fatalf("restored state: %v", err)
	}
	return s
}

// snapNoIndex is the snapshot with the header's applied index zeroed: what
// must not change when a command is refused.
func snapNoIndex(tb testing.TB, s *State) []byte {
	tb.Helper()
	b := snapBytes(tb, s)
	i := bytes.IndexByte(b, '\n')
	var h snapHeader
	if err := json.Unmarshal(b[:i], &h); err != nil {
		tb.Fatalf("snapshot header: %v", err)
	}
	h.Index = 0
	hb, err := json.Marshal(&h)
	if err != nil {
		tb.Fatal(err)
	}
	return append(hb, b[i:]...)
}

// --- command builders ---

func u64(v uint64) *uint64 { return &v }

func ensureCmd(p string, epoch uint64) Command {
	return Command{Op: OpEnsurePrefix, Path: p, Epoch: epoch}
}

func createCmd(p string) Command { return Command{Op: OpCreate, Path: p} }

func ephCmd(sess uint64, p string) Command {
	return Command{Op: OpCreate, Path: p, Ephemeral: true, WriteHeader: api.WriteHeader{Session: sess}}
}

func seqCmd(p string) Command { return Command{Op: OpCreate, Path: p, Sequential: true} }

func lockCmd(sess uint64, dir string, mode api.LockMode) Command {
	return Command{Op: OpCreate, Path: dir + "/lock-", Ephemeral: true, Sequential: true, Lock: mode,
		WriteHeader: api.WriteHeader{Session: sess}}
}

func putCmd(p, v string, ver *uint64) Command {
	return Command{Op: OpPut, Path: p, Value: []byte(v), Version: ver}
}

// delCmd is an operator's delete (admin: it may remove any session's ephemeral node).
func delCmd(p string, ver *uint64) Command {
	return Command{Op: OpDelete, Path: p, Version: ver, Admin: true}
}

func expireCmd(target, epoch uint64) Command {
	return Command{Op: OpExpireSession, Target: target, Epoch: epoch}
}

func closeCmd(sess uint64) Command {
	return Command{Op: OpCloseSession, WriteHeader: api.WriteHeader{Session: sess}}
}

// req sets the dedupe header of c.
func req(c Command, sess, id, ack uint64) Command {
	c.WriteHeader = api.WriteHeader{Session: sess, Request: id, Ack: ack}
	return c
}

// nodePaths returns every node path of s, sorted (tests are in-package).
func nodePaths(s *State) []string {
	out := make([]string, 0, len(s.nodes))
	for p := range s.nodes {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
