package fsm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// badInputFixture: /demo/a (version 2) with a child, an ephemeral /demo/e of
// session 3, a lock dir /demo/l with a held lock; leader epoch 1.
func badInputFixture(t *testing.T) (*harness, uint64) {
	h := newDemo(t)
	sess := h.open()
	if sess != 3 {
		t.Fatalf("fixture session %d", sess)
	}
	h.ok(createCmd("/demo/a"))
	h.ok(putCmd("/demo/a", "v2", nil))
	h.ok(createCmd("/demo/a/child"))
	h.ok(ephCmd(sess, "/demo/e"))
	h.ok(createCmd("/demo/l"))
	h.ok(lockCmd(sess, "/demo/l", ex))
	h.ok(seqCmd("/demo/l/s-"))
	return h, sess
}

// TestBadInputChangesNothing: every refused command answers its code and
// leaves the state byte-identical apart from the applied index.
func TestBadInputChangesNothing(t *testing.T) {
	const sess = 3
	big := make([]byte, api.MaxValueSize+1)
	type tc struct {
		name string
		cmd  Command
		raw  []byte // if set, applied instead of cmd
		code api.Code
	}
	tests := []tc{
		{name: "create value too large", cmd: Command{Op: OpCreate, Path: "/demo/big", Value: big}, code: api.CodeValueTooLarge},
		{name: "create sequential value too large", cmd: Command{Op: OpCreate, Path: "/demo/l/s-", Sequential: true, Value: big}, code: api.CodeValueTooLarge},
		{name: "create make_parents value too large", cmd: Command{Op: OpCreate, Path: "/demo/n/m/o", MakeParents: true, Value: big}, code: api.CodeValueTooLarge},
		{name: "put existing value too large", cmd: Command{Op: OpPut, Path: "/demo/a", Value: big}, code: api.CodeValueTooLarge},
		{name: "put new value too large", cmd: Command{Op: OpPut, Path: "/demo/new", Value: big}, code: api.CodeValueTooLarge},

		{name: "create prefix root", cmd: createCmd("/demo"), code: api.CodeInvalidPath},
		{name: "put prefix root", cmd: putCmd("/demo", "x", nil), code: api.CodeInvalidPath},
		{name: "delete prefix root", cmd: delCmd("/demo", nil), code: api.CodeInvalidPath},
		{name: "create new top-level", cmd: createCmd("/fresh"), code: api.CodeInvalidPath},
		{name: "create sequential top-level", cmd: seqCmd("/fresh-"), code: api.CodeInvalidPath},
		{name: "sequential path too long", cmd: seqCmd("/demo/l/" + strings.Repeat("s", api.MaxPathLen-len("/demo/l/"))), code: api.CodeInvalidPath},
		{name: "path too deep", cmd: Command{Op: OpCreate, Path: "/demo" + strings.Repeat("/d", api.MaxPathDepth), MakeParents: true}, code: api.CodeInvalidPath},

		{name: "create unknown prefix", cmd: createCmd("/nowhere/x"), code: api.CodeWrongCell},
		{name: "create unknown prefix make_parents", cmd: Command{Op: OpCreate, Path: "/nowhere/x/y", MakeParents: true}, code: api.CodeWrongCell},
		{name: "put unknown prefix", cmd: putCmd("/nowhere/x", "v", nil), code: api.CodeWrongCell},
		{name: "delete unknown prefix", cmd: delCmd("/nowhere/x", nil), code: api.CodeWrongCell},
		{name: "ephemeral unknown prefix", cmd: ephCmd(sess, "/nowhere/x"), code: api.CodeWrongCell},

		{name: "put stale version", cmd: putCmd("/demo/a", "x", u64(1)), code: api.CodeVersionMismatch},
		{name: "put future version", cmd: putCmd("/demo/a", "x", u64(3)), code: api.CodeVersionMismatch},
		{name: "delete stale version", cmd: delCmd("/demo/a/child", u64(2)), code: api.CodeVersionMismatch},
		{name: "put version 0 on existing", cmd: putCmd("/demo/a", "x", u64(0)), code: api.CodeNodeExists},
		{name: "put version N on missing", cmd: putCmd("/demo/missing", "x", u64(1)), code: api.CodeNoNode},
		{name: "create existing", cmd: createCmd("/demo/a"), code: api.CodeNodeExists},
		{name: "create existing ephemeral", cmd: ephCmd(sess, "/demo/e"), code: api.CodeNodeExists},
		{name: "create missing parent", cmd: createCmd("/demo/nope/x"), code: api.CodeNoNode},
		{name: "put missing parent", cmd: putCmd("/demo/nope/x", "v", nil), code: api.CodeNoNode},
		{name: "sequential missing parent", cmd: seqCmd("/demo/nope/s-"), code: api.CodeNoNode},
		{name: "delete missing", cmd: delCmd("/demo/missing", nil), code: api.CodeNoNode},
		{name: "delete non-empty", cmd: delCmd("/demo/a", nil), code: api.CodeNotEmpty},
		{name: "delete non-empty lock dir", cmd: delCmd("/demo/l", nil), code: api.CodeNotEmpty},

		{name: "ephemeral without session", cmd: Command{Op: OpCreate, Path: "/demo/x", Ephemeral: true}, code: api.CodeNoSession},
		{name: "ephemeral never-seen session", cmd: ephCmd(999, "/demo/x"), code: api.CodeNoSession},
		{name: "lock without session", cmd: lockCmd(0, "/demo/l", ex), code: api.CodeNoSession},
		{name: "lock persistent", cmd: Command{Op: OpCreate, Path: "/demo/l/x-", Sequential: true, Lock: ex}, code: api.CodeBadRequest},
		{name: "lock not sequential", cmd: Command{Op: OpCreate, Path: "/demo/l/x", Ephemeral: true, Lock: sh, WriteHeader: api.WriteHeader{Session: sess}}, code: api.CodeBadRequest},
		{name: "lock plain", cmd: Command{Op: OpCreate, Path: "/demo/l/x", Lock: ex}, code: api.CodeBadRequest},
		{name: "lock unknown mode", cmd: Command{Op: OpCreate, Path: "/demo/l/x-", Ephemeral: true, Sequential: true, Lock: "upgrade", WriteHeader: api.WriteHeader{Session: sess}}, code: api.CodeBadRequest},
		{name: "child under ephemeral", cmd: createCmd("/demo/e/x"), code: api.CodeBadRequest},
		{name: "ephemeral child under ephemeral", cmd: ephCmd(sess, "/demo/e/x"), code: api.CodeBadRequest},
		{name: "sequential under ephemeral", cmd: seqCmd("/demo/e/s-"), code: api.CodeBadRequest},
		{name: "put under ephemeral", cmd: putCmd("/demo/e/x", "v", nil), code: api.CodeBadRequest},
		{name: "make_parents under ephemeral", cmd: Command{Op: OpCreate, Path: "/demo/e/x/y", MakeParents: true}, code: api.CodeBadRequest},
		{name: "sequential make_parents under ephemeral", cmd: Command{Op: OpCreate, Path: "/demo/e/x/s-", Sequential: true, MakeParents: true}, code: api.CodeBadRequest},
		{name: "put make_parents under ephemeral", cmd: Command{Op: OpPut, Path: "/demo/e/x/y/z", Value: []byte("v"), MakeParents: true}, code: api.CodeBadRequest},

		{name: "ensure_prefix nested", cmd: ensureCmd("/demo/x", 2), code: api.CodeInvalidPath},
		{name: "ensure_prefix relative", cmd: ensureCmd("demo", 2), code: api.CodeInvalidPath},
		{name: "ensure_prefix root", cmd: ensureCmd("/", 2), code: api.CodeInvalidPath},
		{name: "expire stale epoch", cmd: expireCmd(sess, 0), code: api.CodeNotLeader},
		{name: "expire future epoch", cmd: expireCmd(sess, 2), code: api.CodeNotLeader},
		{name: "expire never-seen", cmd: expireCmd(999, 1), code: api.CodeNoSession},
		{name: "close never-seen", cmd: closeCmd(999), code: api.CodeNoSession},
		{name: "unknown op", cmd: Command{Op: "compact", Path: "/demo/a"}, code: api.CodeBadRequest},
		{name: "empty op", cmd: Command{}, code: api.CodeBadRequest},

		{name: "undecodable garbage", raw: []byte{0xff, 0x00, 0x12}, code: api.CodeBadRequest},
		{name: "undecodable empty", raw: []byte{}, code: api.CodeBadRequest},
		{name: "undecodable truncated", raw: []byte(`{"op":"create","path":"/demo/x"`), code: api.CodeBadRequest},
		{name: "undecodable wrong type", raw: []byte(`{"op":"create","path":7}`), code: api.CodeBadRequest},
		{name: "undecodable trailing", raw: []byte(`{"op":"create","path":"/demo/x"}{}`), code: api.CodeBadRequest},
		{name: "undecodable array", raw: []byte(`[1,2]`), code: api.CodeBadRequest},
		{name: "json null", raw: []byte(`null`), code: api.CodeBadRequest},
	}
	for _, p := range []string{
		"a/b", "/demo//b", "/demo/../b", "/demo/./b", "/demo/b/", "/", "", "/demo/\x01", "/demo/a\x7f",
		"/demo/" + strings.Repeat("x", 4096),
	} {
		tests = append(tests,
			tc{name: "create " + p, cmd: Command{Op: OpCreate, Path: p, MakeParents: true}, code: api.CodeInvalidPath},
			tc{name: "sequential " + p, cmd: seqCmd(p), code: api.CodeInvalidPath},
			tc{name: "ephemeral " + p, cmd: ephCmd(sess, p), code: api.CodeInvalidPath},
			tc{name: "put " + p, cmd: putCmd(p, "v", nil), code: api.CodeInvalidPath},
			tc{name: "delete " + p, cmd: delCmd(p, nil), code: api.CodeInvalidPath},
		)
	}
	for _, tt := range tests {
		name := tt.name
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			h, _ := badInputFixture(t)
			before := snapNoIndex(t, h.s)
			var r Result
			if tt.raw != nil {
				r = h.applyBytes(tt.raw)
			} else {
				r = h.apply(tt.cmd)
			}
			if errCode(r) != tt.code {
				t.Fatalf("got %v, want %s", r.Err, tt.code)
			}
			if r.Index != h.idx || r.Node != nil || r.Token != 0 || r.Session != 0 {
				t.Fatalf("refusal carries more than the error: %+v", r)
			}
			if len(h.changes) != 0 {
				t.Fatalf("changes %v", h.changes)
			}
			if after := snapNoIndex(t, h.s); !bytes.Equal(before, after) {
				t.Fatalf("state changed:\n%s\n---\n%s", before, after)
			}
		})
	}
}

// Limits are inclusive: exactly MaxValueSize and MaxPathLen are accepted.
func TestLimitsInclusive(t *testing.T) {
	h := newDemo(t)
	v := bytes.Repeat([]byte{'v'}, api.MaxValueSize)
	h.ok(Command{Op: OpCreate, Path: "/demo/v", Value: v})
	h.ok(Command{Op: OpPut, Path: "/demo/v", Value: v})
	if n, _ := h.s.Get("/demo/v"); !bytes.Equal(n.Value, v) || n.Version != 2 {
		t.Fatalf("value of %d bytes, version %d", len(n.Value), n.Version)
	}
	p := "/demo/" + strings.Repeat("p", api.MaxPathLen-len("/demo/"))
	h.ok(createCmd(p))
	deep := "/demo" + strings.Repeat("/d", api.MaxPathDepth-1)
	h.ok(Command{Op: OpCreate, Path: deep, MakeParents: true})
	if h.s.NumNodes() != 1+2+api.MaxPathDepth-1 {
		t.Fatalf("%d nodes", h.s.NumNodes())
	}
}

// A refused command that carried a request id is remembered (its retry
// answers the same error) but changes nothing else.
func TestBadInputWithRequestID(t *testing.T) {
	h, sess := badInputFixture(t)
	c := req(createCmd("/demo/e/x"), sess, 1, 0)
	h.fail(c, api.CodeBadRequest)
	first := append([]byte(nil), h.raw...)
	retry(t, h, c, first)
	if len(h.s.sessions[sess].results) != 1 {
		t.Fatal("the refusal was not recorded for dedupe")
	}
}
