package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// fullCommand is a command of op with every field set (non-zero), with
// values long enough that a message's length takes two bytes.
func fullCommand(op Op) Command {
	return Command{
		Op:          op,
		WriteHeader: api.WriteHeader{Session: 1 << 40, Secret: "s3cret", Request: 7, Ack: 3},
		Path:        "/demo/locks/lock-", Value: bytes.Repeat([]byte{0, 0xff, 'v'}, 100),
		Version: u64(1<<63 + 5), Ephemeral: true, Sequential: true, Lock: api.LockShared,
		MakeParents: true, ParentsFrom: "/demo", LockDelayMS: 5000, AtMS: -1_700_000_000_000,
		Since: 99, LeaseMS: 12000, Tenant: "team-a",
		Quota: &api.Quota{Sessions: 1, Nodes: -2, Bytes: 1 << 40, Watches: 4, WritesPerSec: 5},
		Admin: true, OwnOnly: true, Nonce: "n-1", Epoch: 1 << 50, Target: 12, ElapsedMS: -3,
		Sessions: []uint64{1, 1 << 63, 0, 300}, Cell: "cell2", DirIndex: 8, Staged: true, First: true, Last: true,
		Nodes: []api.ExportedNode{
			{Path: "/demo", Version: 1},
			{Path: "/demo/a", Value: bytes.Repeat([]byte("x"), 300), Version: 3, NextSeq: 4, Tenant: "t", DelayMS: -1, Kept: true, Container: true},
			{},
		},
		Page: 2, ReplicaID: 3, Term: 4, PrevLeadershipMS: 4000, SilentMS: []int64{0, -1, 1 << 40, 12000}, HandOverIndex: 77, HandOverMS: 1500,
		Restored:  &RestoreStart{Floor: 1 << 20, Prefixes: []string{"/demo", "", "/moved"}},
		If:        fullTxnConds(),
		Then:      fullTxnOps(),
		Container: true, // rwlock/containers (R)
		Uncontain: true, // a put making a container plain (codec V3)
		Permits:   1024, // semaphores (S)
	}
}

// fullResult is a result with every field set.
func fullResult() Result {
	return Result{
		Err:   &api.Error{Code: api.CodeMoved, Message: strings.Repeat("m", 200), Leader: "10.0.0.1:7000", Cell: "cell2"},
		Index: 1 << 62,
		Node: &api.Node{Path: "/demo/l/lock-0000000001", Value: bytes.Repeat([]byte{1}, 150), Version: 2, CreateIndex: 3,
			ModifyIndex: 4, ChildIndex: 5, Ephemeral: true, Owner: 6, Lock: api.LockExclusive, NumChildren: -7, Container: true},
		Token: 1<<40 + 9, WaitFor: "/demo/l/lock-0000000000", Session: 11, Secret: "s", LeaseMS: -12, Epoch: 13,
		Count: 14, Digest: "abcdef",
		TxnNodes: []api.Node{{Path: "/demo/a", Version: 3}, {}, {Path: "/demo/q-0000000001", Value: bytes.Repeat([]byte{2}, 150), Lock: "bogus"}},
		FailedIf: 3, FailedThen: 17,
	}
}

// notInCodec are the fields of Command's and Result's types the codec
// does not carry, and why.
var notInCodec = map[string]string{
	"api.Error.NotApplied": "set by the HTTP API on an answer on its way out (httpapi markNotApplied), never by apply: no result holds it",
	"api.Error.Elected":    "set by cell.WaitUsable on an answer on its way out, never by apply: no result holds it",
}

// TestFullValuesSetEveryField guards the round-trip table: a field added
// to Command or Result without a value here (and so, likely, without a
// codec tag) fails.
func TestFullValuesSetEveryField(t *testing.T) {
	for _, v := range []any{fullCommand(OpCreate), fullCommand(OpCreate).WriteHeader, *fullCommand(OpCreate).Quota,
		fullCommand(OpCreate).Nodes[1], *fullCommand(OpCreate).Restored, fullResult(), *fullResult().Err, *fullResult().Node} {
		rv := reflect.ValueOf(v)
		for i := 0; i < rv.NumField(); i++ {
			if _, ok := notInCodec[fmt.Sprintf("%T.%s", v, rv.Type().Field(i).Name)]; ok {
				continue
			}
			if rv.Field(i).IsZero() {
				t.Errorf("%T.%s is zero in the full value", v, rv.Type().Field(i).Name)
			}
		}
	}
}

func roundTripCommand(t *testing.T, name string, c Command) []byte {
	t.Helper()
	b := c.Encode()
	if b[0] != codecV1 {
		t.Fatalf("%s: encoded with first byte 0x%02x", name, b[0])
	}
	got, err := DecodeCommand(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("%s: round trip changed %v", name, differingFields(got, c))
	}
	return b
}

// differingFields names the fields of two structs of one type that differ.
func differingFields(a, b any) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var names []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			names = append(names, va.Type().Field(i).Name)
		}
	}
	return names
}

// TestCodecRoundTrip: every op with every field set, and the cases where
// nil and a pointer to zero differ, decode to what was encoded; JSON (the
// old codec) of the same command decodes to the same command.
func TestCodecRoundTrip(t *testing.T) {
	ops := append([]Op{"", "some_future_op"}, codecOps[1:]...)
	for _, op := range ops {
		c := fullCommand(op)
		roundTripCommand(t, "full "+string(op), c)
		j, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		if fromJSON, err := DecodeCommand(j); err != nil || !reflect.DeepEqual(fromJSON, c) {
			t.Fatalf("full %s from JSON: %+v, %v", op, fromJSON, err)
		}
	}
	edge := map[string]Command{
		"zero":                 {},
		"version nil":          {Op: OpPut, Path: "/demo/a"},
		"version 0":            {Op: OpPut, Path: "/demo/a", Version: u64(0)},
		"quota of zeros":       {Op: OpOpenSession, Quota: &api.Quota{}},
		"restored no prefixes": {Op: OpLeaderStart, Restored: &RestoreStart{}},
		"lock mode unknown":    {Op: OpCreate, Lock: "bogus"},
		"lock exclusive":       {Op: OpCreate, Lock: api.LockExclusive},
		"lock permit":          {Op: OpCreate, Lock: api.LockPermit, Permits: 3, Ephemeral: true, Sequential: true},
		"permits negative":     {Op: OpCreate, Lock: api.LockPermit, Permits: -1},
		"lock upgradable":      {Op: OpCreate, Lock: api.LockUpgradable, MakeParents: true, Container: true},
		"set lock mode":        {Op: OpSetLockMode, Path: "/demo/l/w-0000000001", Lock: api.LockShared, WriteHeader: api.WriteHeader{Session: 4, Request: 2}},
		"value of 200 KiB":     {Op: OpPut, Value: bytes.Repeat([]byte("v"), 200<<10)},
		"stage of 1000 nodes":  {Op: OpStagePrefix, Nodes: make([]api.ExportedNode, 1000)},
	}
	for name, c := range edge {
		roundTripCommand(t, name, c)
	}
	if a, b := (&Command{Version: nil}).Encode(), (&Command{Version: u64(0)}).Encode(); bytes.Equal(a, b) {
		t.Fatal("a nil version and a version of 0 encode alike")
	}
	results := map[string]Result{
		"full": fullResult(), "zero": {}, "empty err": {Err: &api.Error{}}, "empty node": {Node: &api.Node{}},
		"node lock unknown": {Node: &api.Node{Lock: "bogus"}}, "node shared": {Node: &api.Node{Lock: api.LockShared}},
		"node upgradable container": {Node: &api.Node{Lock: api.LockUpgradable, Container: true}},
		"node permit":               {Node: &api.Node{Lock: api.LockPermit, Ephemeral: true}},
	}
	for name, r := range results {
		b := r.Encode()
		got, err := DecodeResult(b)
		if err != nil || !reflect.DeepEqual(got, r) || b[0] != codecV1 {
			t.Fatalf("result %s: round trip %+v, %v; want %+v", name, got, err, r)
		}
	}
	r := fullResult()
	j, _ := json.Marshal(&r)
	if got, err := DecodeResult(j); err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("full result from JSON: %+v, %v", got, err)
	}
}

// uv is v as a uvarint.
func uv(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestCodecRefusesBadInput: truncated, oversized, trailing, unordered or
// unknown input, binary or JSON, is an error (never a panic).
func TestCodecRefusesBadInput(t *testing.T) {
	v1, end := []byte{codecV1}, []byte{codecEnd}
	bad := map[string][]byte{
		"empty":                {},
		"unknown version":      {0x02, codecEnd},
		"high version":         {0xff},
		"no end byte":          cat(v1, []byte{cmdOpCode, 4}),
		"trailing after end":   cat(v1, []byte{cmdOpCode, 4}, end, []byte{0}),
		"unknown tag":          cat(v1, []byte{100}, end),
		"tag over 127":         cat(v1, []byte{0x80}, end),
		"fields out of order":  cat(v1, []byte{cmdPath, 1, 'a', cmdSession, 1}, end),
		"field repeated":       cat(v1, []byte{cmdSession, 1, cmdSession, 2}, end),
		"unknown op code":      cat(v1, []byte{cmdOpCode, 99}, end),
		"op code 0":            cat(v1, []byte{cmdOpCode, 0}, end),
		"unknown lock code":    cat(v1, []byte{cmdLockCode, byte(len(codecLocks))}, end),
		"uvarint overflow":     cat(v1, []byte{cmdSession}, bytes.Repeat([]byte{0xff}, 11), end),
		"string past the end":  cat(v1, []byte{cmdPath, 5, 'a'}, end),
		"string over limit":    cat(v1, []byte{cmdPath}, uv(maxCodecBytes+1), make([]byte, maxCodecBytes+1), end),
		"huge string length":   cat(v1, []byte{cmdPath}, uv(1<<62), end),
		"huge sessions count":  cat(v1, []byte{cmdSessions}, uv(1<<40), end),
		"sessions over limit":  cat(v1, []byte{cmdSessions}, uv(maxCodecSessions+1), make([]byte, maxCodecSessions+1), end),
		"nodes over limit":     cat(v1, []byte{cmdNodes}, uv(maxCodecNodes+1), make([]byte, maxCodecNodes+1), end),
		"sessions truncated":   cat(v1, []byte{cmdSessions, 3, 1, 2}, end),
		"quota past the end":   cat(v1, []byte{cmdQuota, 9, quotaSessions, 2}, end),
		"quota unknown tag":    cat(v1, []byte{cmdQuota, 1, 9}, end),
		"quota bad varint":     cat(v1, []byte{cmdQuota, 2, quotaNodes, 0x80}, end),
		"node unordered":       cat(v1, []byte{cmdNodes, 1, 4, expVersion, 1, expPath, 0}, end),
		"restored prefixes":    cat(v1, []byte{cmdRestored, 3, restorePrefixes, 1, 5}, end),
		"json truncated":       []byte(`{"op":"create"`),
		"json trailing":        []byte(`{"op":"create"}{}`),
		"json wrong type":      []byte(`{"op":7}`),
		"json array":           []byte(`[1]`),
		"json null":            []byte(`null`),
		"json with whitespace": []byte(` {"op":"create"}`),
	}
	for name, b := range bad {
		if c, err := DecodeCommand(b); err == nil {
			t.Errorf("%s: decoded %+v", name, c)
		}
	}
}

// TestCodecRefusesCutsAndOverruns: every cut of a valid entry or result
// is refused (the end byte is gone), as is any byte appended to one; a
// huge length within the limits but past the input allocates nothing.
func TestCodecRefusesCutsAndOverruns(t *testing.T) {
	v1, end := []byte{codecV1}, []byte{codecEnd}
	full, res := fullCommand(OpCreate), fullResult()
	for _, b := range [][]byte{full.Encode(), res.Encode()} {
		for n := range len(b) {
			_, cerr := DecodeCommand(b[:n])
			_, rerr := DecodeResult(b[:n])
			if cerr == nil || rerr == nil {
				t.Fatalf("a cut at %d of %d bytes decodes", n, len(b))
			}
		}
		if _, err := DecodeCommand(append(bytes.Clone(b), 0)); err == nil {
			t.Fatal("a byte after the end decodes")
		}
	}
	for name, b := range map[string][]byte{
		"empty":             {},
		"unknown version":   {0x7c, codecEnd},
		"err unknown tag":   cat(v1, []byte{resErr, 1, 7}, end),
		"node unknown lock": cat(v1, []byte{resNode, 2, nodeLockCode, 9}, end),
		"count overflow":    cat(v1, []byte{resCount}, bytes.Repeat([]byte{0xff}, 10), end),
	} {
		if r, err := DecodeResult(b); err == nil {
			t.Errorf("result %s: decoded %+v", name, r)
		}
	}
	// Lengths within the limits but past the input allocate nothing for
	// their elements (10 runs, a few hundred bytes of error text each).
	for _, b := range [][]byte{
		cat(v1, []byte{cmdValue}, uv(maxCodecBytes), []byte{1, 2}, end),
		cat(v1, []byte{cmdSessions}, uv(maxCodecSessions), []byte{1, 2}, end),
		cat(v1, []byte{cmdNodes}, uv(maxCodecNodes), []byte{1, 2}, end),
	} {
		if n := allocatedBytes(10, func() { _, _ = DecodeCommand(b) }); n > 64<<10 {
			t.Errorf("refusing %x allocated %d bytes", b[:8], n)
		}
	}
}

// allocatedBytes is about how many bytes runs calls of f allocate.
func allocatedBytes(runs int, f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestCodecAppliesAsBefore: through the state, a refused bad entry is
// bad_request naming the codec's reason.
func TestCodecAppliesAsBefore(t *testing.T) {
	h := newDemo(t)
	r := h.apply(Command{Op: OpCreate, Path: "/demo/x"})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	h.idx++
	a := h.s.ApplyEntry(h.idx, []byte{0x07, 0})
	if a.Result.Err == nil || a.Result.Err.Code != api.CodeBadRequest || !strings.Contains(a.Result.Err.Message, "0x07") {
		t.Fatalf("unknown codec version: %+v", a.Result.Err)
	}
}

// TestOldSnapshotResultsLoad: a state at log codec 0 (every snapshot
// written before the codec gate) keeps its dedupe answers as JSON. Its
// snapshot loads to the same bytes; one holding a binary answer (written
// by a build that encoded binary ungated) loads with the answer in JSON;
// a retry answers the first attempt's result, in the binary codec (the
// proposer's own build reads it).
func TestOldSnapshotResultsLoad(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	h.ok(req(createCmd("/demo/a"), sess, 1, 0))
	first := append([]byte(nil), h.raw...)
	snap := h.snap()
	firstRes, err := DecodeResult(first)
	if err != nil {
		t.Fatal(err)
	}
	asJSON, err := json.Marshal(&firstRes)
	if err != nil {
		t.Fatal(err)
	}
	// A result, a byte slice, is base64 in the snapshot's JSON.
	b64 := func(b []byte) []byte { q, _ := json.Marshal(b); return q }
	if !bytes.Contains(snap, b64(asJSON)) {
		t.Fatal("a state at codec 0 does not keep its answer as JSON")
	}
	binary := bytes.Replace(snap, b64(asJSON), b64(first), 1)
	for name, in := range map[string][]byte{"as written": snap, "with a binary answer": binary} {
		rs := harnessOn(t, restore(t, in))
		if got := rs.snap(); !bytes.Equal(got, snap) {
			t.Fatalf("%s: the snapshot loads to different bytes:\n%s\nwant\n%s", name, got, snap)
		}
		rs.apply(req(createCmd("/demo/a"), sess, 1, 0))
		if !bytes.Equal(rs.raw, first) {
			t.Fatalf("%s: retry after loading: %q, want %q", name, rs.raw, first)
		}
	}
	if got := recodeResult(LogCodecV1, []byte("{not json")); string(got) != "{not json" {
		t.Fatalf("an undecodable stored result changed: %q", got)
	}
}

// FuzzDecodeCommand: decoding never panics, and what decodes re-encodes
// to bytes that decode to the same command (exactly, for binary input;
// JSON input may hold an empty slice that the binary codec reads as nil).
func FuzzDecodeCommand(f *testing.F) {
	for _, op := range codecOps[1:] {
		c := fullCommand(op)
		f.Add(c.Encode())
	}
	f.Add((&Command{Op: OpPut, Version: u64(0)}).Encode())
	f.Add([]byte(`{"op":"leader_start","restored":{"floor":1,"prefixes":[]},"value":""}`))
	f.Add([]byte{codecV1, cmdSessions, 2, 1, 0x80, 1, codecEnd})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			return
		}
		b := c.Encode()
		c2, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("re-encoding of %+v does not decode: %v", c, err)
		}
		if data[0] == codecV1 && !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip\n got %+v\nwant %+v", c2, c)
		}
		if !bytes.Equal(c2.Encode(), b) {
			t.Fatal("encoding is not stable")
		}
	})
}

// FuzzDecodeResult: as FuzzDecodeCommand, for results.
func FuzzDecodeResult(f *testing.F) {
	r := fullResult()
	f.Add(r.Encode())
	f.Add((&Result{Err: &api.Error{Code: api.CodeNoNode}, Index: 3}).Encode())
	f.Add([]byte(`{"err":{"code":"moved","cell":"c"},"index":4,"node":{"path":"/a","value":""}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeResult(data)
		if err != nil {
			return
		}
		b := r.Encode()
		r2, err := DecodeResult(b)
		if err != nil {
			t.Fatalf("re-encoding of %+v does not decode: %v", r, err)
		}
		if data[0] == codecV1 && !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip\n got %+v\nwant %+v", r2, r)
		}
		if !bytes.Equal(r2.Encode(), b) {
			t.Fatal("encoding is not stable")
		}
	})
}
