package fsm

import (
	"bytes"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestSetCodecRaisesOnly: set_codec raises the cell's codec, never lowers
// it, is idempotent, and refuses a codec this build does not know.
func TestSetCodecRaisesOnly(t *testing.T) {
	h := newDemo(t)
	if got := h.s.LogCodec(); got != LogCodecJSON {
		t.Fatalf("a new state is at codec %d, want 0", got)
	}
	for _, step := range []struct {
		to   LogCodec
		code api.Code
		want LogCodec
	}{
		{0, "", 0},
		{1, "", 1},
		{1, "", 1}, // idempotent
		{0, "", 1}, // never lowered
		{LogCodecNewest + 1, api.CodeBadRequest, 1},
	} {
		cmd := SetCodecCmd(step.to)
		if r := h.applyBytes(cmd.EncodeFor(h.s.LogCodec())); errCode(r) != step.code {
			t.Fatalf("set_codec %d: %v, want code %q", step.to, r.Err, step.code)
		}
		if got := h.s.LogCodec(); got != step.want {
			t.Fatalf("after set_codec %d: codec %d, want %d", step.to, got, step.want)
		}
	}
}

// TestEncodeFor: a command and a result are JSON at codec 0 and binary at
// codec 1, except set_codec, always JSON; EntryCodec reads it back.
func TestEncodeFor(t *testing.T) {
	put := Command{Op: OpPut, Path: "/demo/a", Value: []byte("v")}
	set := SetCodecCmd(LogCodecV1)
	res := Result{Index: 7, Token: 3}
	for _, tc := range []struct {
		name string
		b    []byte
		want LogCodec
	}{
		{"put at 0", put.EncodeFor(LogCodecJSON), LogCodecJSON},
		{"put at 1", put.EncodeFor(LogCodecV1), LogCodecV1},
		{"set_codec at 1", set.EncodeFor(LogCodecV1), LogCodecJSON},
		{"result at 0", res.EncodeFor(LogCodecJSON), LogCodecJSON},
		{"result at 1", res.EncodeFor(LogCodecV1), LogCodecV1},
		{"empty", nil, LogCodecJSON},
	} {
		if got := EntryCodec(tc.b); got != tc.want {
			t.Errorf("%s: codec %d, want %d (%q)", tc.name, got, tc.want, tc.b)
		}
	}
	if c, err := DecodeCommand(set.EncodeFor(LogCodecV1)); err != nil || c.Op != OpSetCodec || c.Epoch != 1 {
		t.Fatalf("set_codec decodes to %+v, %v", c, err)
	}
}

// TestBinaryEntryAtCodec0Applies: an entry written above the state's codec
// (which a gated proposer never writes) still applies on this build, which
// decodes both: the protection is the proposer's. EntryCodec lets the
// runtime see it.
func TestBinaryEntryAtCodec0Applies(t *testing.T) {
	h := newDemo(t)
	entry := (&Command{Op: OpCreate, Path: "/demo/bin", Value: []byte("x")}).EncodeFor(LogCodecV1)
	if EntryCodec(entry) <= h.s.LogCodec() {
		t.Fatal("the entry is not above the state's codec")
	}
	if r := h.applyBytes(entry); r.Err != nil {
		t.Fatalf("a binary entry at codec 0: %v", r.Err)
	}
	if _, ok := h.s.Get("/demo/bin"); !ok {
		t.Fatal("the binary entry applied nothing")
	}
}

// storedResult is session sess's stored answer to request id.
func storedResult(t *testing.T, s *State, sess, id uint64) []byte {
	t.Helper()
	b, ok := s.sessions[sess].lookup(id)
	if !ok {
		t.Fatalf("session %d keeps no answer to request %d", sess, id)
	}
	return b
}

// TestStoredResultsFollowCodec: dedupe answers are stored in the state's
// codec; set_codec re-encodes those kept before it; a replica restored
// from a snapshot taken before the switch, applying the same entries,
// ends byte-identical to the one that applied them all; retries answer
// alike on both sides of the switch.
func TestStoredResultsFollowCodec(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	h.ok(req(createCmd("/demo/a"), sess, 1, 0))
	first := append([]byte(nil), h.raw...)
	if got := EntryCodec(storedResult(t, h.s, sess, 1)); got != LogCodecJSON {
		t.Fatalf("at codec 0 the answer is stored in codec %d", got)
	}
	before := h.snap()
	set, b, retry := SetCodecCmd(LogCodecV1), req(createCmd("/demo/b"), sess, 2, 0), req(createCmd("/demo/a"), sess, 1, 0)
	rest := [][]byte{set.EncodeFor(LogCodecJSON), b.EncodeFor(LogCodecV1), retry.EncodeFor(LogCodecV1)} // the last: a retry across the switch
	rs := harnessOn(t, restore(t, before))
	for _, e := range rest {
		h.applyBytes(e)
		rs.applyBytes(e)
	}
	if !bytes.Equal(h.raw, first) || !bytes.Equal(rs.raw, first) {
		t.Fatalf("a retry across the switch answers %q / %q, want %q", h.raw, rs.raw, first)
	}
	for _, id := range []uint64{1, 2} {
		if got := EntryCodec(storedResult(t, h.s, sess, id)); got != LogCodecV1 {
			t.Fatalf("at codec 1 request %d's answer is stored in codec %d", id, got)
		}
	}
	if a, b := h.snap(), rs.snap(); !bytes.Equal(a, b) {
		t.Fatalf("the replicas differ after the switch:\n%s\n%s", a, b)
	}
	if got := restore(t, h.snap()).LogCodec(); got != LogCodecV1 {
		t.Fatalf("the snapshot restores codec %d, want 1", got)
	}
}

// TestSnapshotOfUnknownCodecRefused: a snapshot at a codec newer than this
// build's does not load.
func TestSnapshotOfUnknownCodecRefused(t *testing.T) {
	h := newDemo(t)
	snap := h.snap()
	bad := bytes.Replace(snap, []byte(`"format":1,`), []byte(`"format":1,"log_codec":9,`), 1)
	if bytes.Equal(bad, snap) {
		t.Fatal("no header to change")
	}
	if _, err := ReadSnapshot(bytes.NewReader(bad)); err == nil {
		t.Fatal("a snapshot at codec 9 loaded")
	}
}
