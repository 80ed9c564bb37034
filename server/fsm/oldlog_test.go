package fsm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lockservice/lockd/api"
)

// The old log: entries as the version-0 codec (JSON, before issue 25) wrote
// them, one per line, and the results it answered, one per line. Made once
// by LOCKD_WRITE_OLDLOG=1 go test -run '^TestOldLogReplays$' ./server/fsm/
// with the JSON codec in place; json.Marshal of a Command or Result is that
// codec, so regenerating writes the same format (but commit only files
// made by a build whose state answered them).
const (
	oldLogEntries = "testdata/oldlog-v0.jsonl"
	oldLogResults = "testdata/oldlog-v0.results.jsonl"
	// oldLogMaxEntries bounds the file read back.
	oldLogMaxEntries = 1000
)

// oldLogWriter applies commands to a state, JSON-encoded as the log held
// them, and keeps each entry and its result.
type oldLogWriter struct {
	tb      testing.TB
	s       *State
	entries [][]byte
	results [][]byte
}

func (w *oldLogWriter) apply(c Command) Result {
	w.tb.Helper()
	e, err := json.Marshal(&c)
	if err != nil {
		w.tb.Fatal(err)
	}
	a := w.s.ApplyEntry(w.s.Index()+1, e)
	r, err := json.Marshal(&a.Result)
	if err != nil {
		w.tb.Fatal(err)
	}
	w.entries, w.results = append(w.entries, e), append(w.results, r)
	return a.Result
}

func (w *oldLogWriter) index() uint64 { return w.s.Index() }

// oldLogSequence is a cell's life in little: leaderships, prefixes, sessions
// of a tenant with a quota, lock nodes with a lock-delay, puts and deletes
// with and without versions, a dedupe retry, refusals, confirm, tick, a
// cache grant, an expiry and the lock-delay it starts and ends, a close, a
// prefix sealed, unsealed, sealed and dropped, another staged in and
// served, and a restore plan. Together its entries set every field of a
// Command.
func oldLogSequence(w *oldLogWriter) {
	w.apply(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1})
	w.apply(ensureCmd("/demo", 1))
	w.apply(Command{Op: OpEnsurePrefix, Path: "/other", Epoch: 2, AtMS: 1_700_000_000_000})
	quota := &api.Quota{Sessions: 10, Nodes: 100, Bytes: 1 << 20, Watches: 50, WritesPerSec: 100}
	openA := Command{Op: OpOpenSession, LeaseMS: 12000, Nonce: "n-A", Tenant: "team-a", Quota: quota}
	openA.Secret = "secret-a"
	a := w.apply(openA).Session
	openB := Command{Op: OpOpenSession, LeaseMS: 10000}
	openB.Secret = "secret-b"
	b := w.apply(openB).Session
	openC := Command{Op: OpOpenSession, Nonce: "n-C"}
	openC.Secret = "secret-c"
	c := w.apply(openC).Session
	w.apply(openA) // a retried open: the same session
	hdr := func(sess uint64, secret string, reqID, ack uint64) api.WriteHeader {
		return api.WriteHeader{Session: sess, Secret: secret, Request: reqID, Ack: ack}
	}
	w.apply(Command{Op: OpCreate, Path: "/demo/locks", Admin: true})
	lockA := Command{Op: OpCreate, WriteHeader: hdr(a, "secret-a", 1, 0), Path: "/demo/locks/lock-", Ephemeral: true,
		Sequential: true, Lock: api.LockExclusive, LockDelayMS: 5000, Tenant: "team-a", Quota: quota, ParentsFrom: "/demo"}
	w.apply(lockA)
	w.apply(Command{Op: OpCreate, WriteHeader: hdr(b, "secret-b", 1, 0), Path: "/demo/locks/lock-", Ephemeral: true,
		Sequential: true, Lock: api.LockShared})
	w.apply(lockA) // a retry: the first answer
	value := bytes.Repeat([]byte("v"), 100)
	w.apply(Command{Op: OpCreate, WriteHeader: hdr(a, "secret-a", 2, 2), Path: "/demo/cfg/a/b", Value: value,
		MakeParents: true, ParentsFrom: "/demo", Tenant: "team-a", Quota: quota})
	w.apply(Command{Op: OpPut, Path: "/demo/cfg/a/b", Value: []byte("second"), Version: u64(1)})
	w.apply(Command{Op: OpPut, Path: "/demo/cfg/a/b", Value: []byte("refused"), Version: u64(0)})
	w.apply(Command{Op: OpPut, Path: "/demo/new", Value: []byte("any version")})
	w.apply(Command{Op: OpCreate, WriteHeader: hdr(c, "secret-c", 0, 0), Path: "/demo/eph", Ephemeral: true})
	w.apply(Command{Op: OpPut, WriteHeader: hdr(b, "secret-b", 2, 0), Path: "/demo/eph", Value: []byte("x"), OwnOnly: true})
	w.apply(Command{Op: OpDelete, Path: "/demo/cfg/a/b", Version: u64(2)})
	w.apply(Command{Op: OpDelete, Path: "/demo/cfg"}) // not empty
	w.apply(Command{Op: OpConfirm, Epoch: 1, Sessions: []uint64{a, b, c}})
	w.apply(Command{Op: OpLeaderTick, Epoch: 1, ElapsedMS: 1500})
	w.apply(Command{Op: OpCacheSession, Target: b})
	w.apply(Command{Op: OpExpireSession, Target: a, Epoch: 1, AtMS: 1_700_000_001_000})
	released := w.index()
	w.apply(Command{Op: OpEndLockDelay, Path: "/demo/locks", Since: released})
	w.apply(Command{Op: OpLeaderStart, ReplicaID: 2, Term: 2, Epoch: 1, PrevLeadershipMS: 4000})
	closeC := Command{Op: OpCloseSession, AtMS: 1_700_000_002_000}
	closeC.Session, closeC.Secret = c, "secret-c"
	w.apply(closeC)
	w.apply(Command{Op: OpSealPrefix, Path: "/other", Cell: "cell2", DirIndex: 7})
	w.apply(Command{Op: OpUnsealPrefix, Path: "/other", DirIndex: 8, AtMS: 1_700_000_003_000})
	w.apply(Command{Op: OpSealPrefix, Path: "/other", Cell: "cell2", DirIndex: 9})
	w.apply(Command{Op: OpDropPrefix, Path: "/other"})
	w.apply(Command{Op: OpPut, Path: "/other/x", Value: []byte("moved")}) // refused: moved
	oldLogStage(w)
	w.apply(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 3, Epoch: 2,
		Restored: &RestoreStart{Floor: 1 << 20, Prefixes: []string{"/demo", "/moved"}}})
	w.apply(Command{Op: OpDelete, WriteHeader: hdr(b, "secret-b", 3, 1), Path: "/demo/new", Version: u64(1)})
}

// oldLogStage stages the prefix /moved in two pages and serves it.
func oldLogStage(w *oldLogWriter) {
	w.apply(Command{Op: OpStagePrefix, Path: "/moved", Epoch: 3, First: true, DirIndex: 1, Page: 0, Nodes: []api.ExportedNode{
		{Path: "/moved", Version: 1},
		{Path: "/moved/a", Value: []byte("kept value"), Version: 3, NextSeq: 4, Tenant: "team-a"},
	}})
	w.apply(Command{Op: OpStagePrefix, Path: "/moved", Epoch: 3, Last: true, DirIndex: 1, Page: 1, Nodes: []api.ExportedNode{
		{Path: "/moved/k", NextSeq: 9, DelayMS: 3000, Kept: true},
		{Path: "/moved/l", Version: 1, DelayMS: 2000},
	}})
	w.apply(Command{Op: OpEnsurePrefix, Path: "/moved", Epoch: 3, Staged: true, AtMS: 1_700_000_004_000})
}

// writeOldLog writes the old log's files (see oldLogEntries).
func writeOldLog(t *testing.T) {
	w := &oldLogWriter{tb: t, s: New()}
	oldLogSequence(w)
	for name, lines := range map[string][][]byte{oldLogEntries: w.entries, oldLogResults: w.results} {
		if err := os.WriteFile(name, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d entries to %s", len(w.entries), filepath.Dir(oldLogEntries))
}

// readLines reads a file of one item per line, at most oldLogMaxEntries.
func readLines(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), api.MaxRequestBody)
	for sc.Scan() {
		if len(lines) == oldLogMaxEntries {
			t.Fatalf("%s holds more than %d lines", name, oldLogMaxEntries)
		}
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestOldLogReplays: a log written by the JSON codec still applies, with
// the answers it had then, and replaying the same commands binary-encoded
// ends in the byte-identical state.
func TestOldLogReplays(t *testing.T) {
	if os.Getenv("LOCKD_WRITE_OLDLOG") == "1" {
		writeOldLog(t)
	}
	entries, results := readLines(t, oldLogEntries), readLines(t, oldLogResults)
	if len(entries) != len(results) || len(entries) == 0 {
		t.Fatalf("%d entries, %d results", len(entries), len(results))
	}
	fromJSON, fromBinary := New(), New()
	for i, e := range entries {
		if e[0] != '{' {
			t.Fatalf("entry %d is not JSON: %q", i, e)
		}
		cmd, err := DecodeCommand(e)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		idx := uint64(i + 1)
		got := fromJSON.ApplyEntry(idx, e)
		var want Result
		if err := json.Unmarshal(results[i], &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Result, want) {
			t.Fatalf("entry %d (%s): result %+v, want %+v as written", i, e, got.Result, want)
		}
		bin := cmd.Encode()
		if bin[0] == '{' {
			t.Fatalf("entry %d re-encoded as JSON", i)
		}
		b := fromBinary.ApplyEntry(idx, bin)
		if !bytes.Equal(b.Encoded, got.Encoded) || !reflect.DeepEqual(b.Changes, got.Changes) {
			t.Fatalf("entry %d binary-encoded: result %+v changes %v, want %+v %v", i, b.Result, b.Changes, got.Result, got.Changes)
		}
	}
	for _, s := range []*State{fromJSON, fromBinary} {
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := snapBytes(t, fromJSON), snapBytes(t, fromBinary); !bytes.Equal(a, b) {
		t.Fatal("the old log and its binary re-encoding end in different states")
	}
}
