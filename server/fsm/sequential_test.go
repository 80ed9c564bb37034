package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

func TestSequentialNumbering(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/a"))
	h.ok(createCmd("/demo/b"))
	sess := h.open()
	steps := []struct {
		cmd  Command
		want string
	}{
		{seqCmd("/demo/a/w-"), "/demo/a/w-0000000000"},
		{seqCmd("/demo/a/w-"), "/demo/a/w-0000000001"},
		{seqCmd("/demo/b/w-"), "/demo/b/w-0000000000"}, // per parent
		{seqCmd("/demo/a/x-"), "/demo/a/x-0000000002"}, // one counter per parent, whatever the name
		{ephCmd(sess, "/demo/a/w-"), ""},               // "": not sequential, keeps its name, uses no number
		{seqCmd("/demo/w-"), "/demo/w-0000000000"},     // a prefix root has a counter too
		{Command{Op: OpCreate, Path: "/demo/a/e-", Ephemeral: true, Sequential: true, WriteHeader: api.WriteHeader{Session: sess}}, "/demo/a/e-0000000003"},
		{lockCmd(sess, "/demo/a", api.LockShared), "/demo/a/lock-0000000004"},
		{Command{Op: OpCreate, Path: "/demo/c/d/w-", Sequential: true, MakeParents: true}, "/demo/c/d/w-0000000000"},
	}
	for _, st := range steps {
		r := h.ok(st.cmd)
		if st.want == "" {
			if r.Node.Path != st.cmd.Path {
				t.Fatalf("non-sequential create got %s", r.Node.Path)
			}
			continue
		}
		if r.Node.Path != st.want {
			t.Fatalf("create %s: %s, want %s", st.cmd.Path, r.Node.Path, st.want)
		}
	}
}

func TestSequentialCounterNotReused(t *testing.T) {
	h := newDemo(t)
	for i := range 3 {
		p := h.ok(seqCmd("/demo/w-")).Node.Path
		if want := fmt.Sprintf("/demo/w-%010d", i); p != want {
			t.Fatalf("got %s, want %s", p, want)
		}
		h.ok(delCmd(p, nil)) // deleting the highest does not roll back
	}
	// A refused sequential create does not advance the counter.
	h.fail(Command{Op: OpCreate, Path: "/demo/w-", Sequential: true, Value: make([]byte, api.MaxValueSize+1)}, api.CodeValueTooLarge)
	h.fail(Command{Op: OpCreate, Path: "/demo/w-", Sequential: true, Ephemeral: true}, api.CodeNoSession)
	if p := h.ok(seqCmd("/demo/w-")).Node.Path; p != "/demo/w-0000000003" {
		t.Fatalf("after deletes and refusals: %s", p)
	}
	// Deleting and re-creating the parent starts a new counter: it is the
	// parent's, and the parent is new.
	h.ok(createCmd("/demo/d"))
	h.ok(seqCmd("/demo/d/w-"))
	h.ok(delCmd("/demo/d/w-0000000000", nil))
	h.ok(delCmd("/demo/d", nil))
	h.ok(createCmd("/demo/d"))
	if p := h.ok(seqCmd("/demo/d/w-")).Node.Path; p != "/demo/d/w-0000000000" {
		t.Fatalf("fresh parent: %s", p)
	}
}

func TestSequentialSurvivesSnapshot(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/a"))
	for range 5 {
		h.ok(seqCmd("/demo/a/w-"))
	}
	h.ok(delCmd("/demo/a/w-0000000004", nil))
	h.ok(seqCmd("/demo/w-"))
	rh := harnessOn(t, restore(t, h.snap()))
	for _, c := range []struct{ dir, want string }{
		{"/demo/a", "/demo/a/w-0000000005"},
		{"/demo", "/demo/w-0000000001"},
	} {
		if p := rh.ok(seqCmd(c.dir + "/w-")).Node.Path; p != c.want {
			t.Errorf("after restore: %s, want %s", p, c.want)
		}
	}
}

// A sequential name taken by a plain node is skipped, so one clash cannot
// block every later sequential create under the parent.
func TestSequentialCollision(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/w-0000000000"))
	h.ok(createCmd("/demo/w-0000000001"))
	if p := h.ok(seqCmd("/demo/w-")).Node.Path; p != "/demo/w-0000000002" {
		t.Fatalf("sequential create took %s, want /demo/w-0000000002", p)
	}
	if n := h.s.nodes["/demo"].nextSeq; n != 3 {
		t.Fatalf("counter at %d, want 3", n)
	}
}

func TestSequentialPathLength(t *testing.T) {
	h := newDemo(t)
	base := "/demo/" + strings.Repeat("x", api.MaxPathLen-len("/demo/")-seqDigits)
	if p := h.ok(seqCmd(base)).Node.Path; len(p) != api.MaxPathLen {
		t.Fatalf("path of %d bytes", len(p))
	}
	h.fail(seqCmd(base+"y"), api.CodeInvalidPath)
}

func TestSequentialExhausted(t *testing.T) {
	h := newDemo(t)
	h.s.nodes["/demo"].nextSeq = maxSeq
	if p := h.ok(seqCmd("/demo/w-")).Node.Path; p != "/demo/w-9999999999" {
		t.Fatalf("last sequential: %s", p)
	}
	h.fail(seqCmd("/demo/w-"), api.CodeBadRequest)
}
