package fsm

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestRestoreStart: the first leader_start after a restore keeps only the
// plan's prefixes (a served one and its session's lock go; a tombstone of
// a move before the backup stays and answers moved) and raises the leader
// epoch to the plan's floor; a later leader_start carrying the same plan
// changes no prefix, not even one assigned since, and counts on by one.
func TestRestoreStart(t *testing.T) {
	h := newDemo(t)
	for _, p := range []string{"/other", "/gone"} {
		h.ok(ensureCmd(p, 1))
	}
	s := h.open()
	h.ok(createCmd("/other/x"))
	h.ok(lockCmd(s, "/other/x", api.LockExclusive))
	h.ok(Command{Op: OpCreate, Path: "/other/keep", Value: []byte("1")})
	h.ok(Command{Op: OpCreate, Path: "/demo/a", Value: []byte("a")})
	h.ok(sealCmd("/gone", "elsewhere", 1))
	plan := &RestoreStart{Floor: 3 * api.LeaderEpochsPerRestore, Prefixes: []string{"/demo"}}

	r := h.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 100, Restored: plan})
	if r.Epoch != plan.Floor || h.s.Epoch() != plan.Floor {
		t.Fatalf("leader epoch %d (state %d) after the restore's leader_start, want the floor %d", r.Epoch, h.s.Epoch(), plan.Floor)
	}
	deleted := map[string]bool{}
	for _, ch := range h.changes {
		if ch.Type == ChangeDeleted {
			deleted[ch.Path] = true
		}
	}
	for _, tc := range []struct {
		path    string
		want    api.Code // of CheckServes: "" served
		deleted bool     // a change reported it deleted
	}{
		{"/demo/a", "", false},
		{"/other/keep", api.CodeWrongCell, true},
		{"/other/x/lock-0000000000", api.CodeWrongCell, true},
		{"/other", api.CodeWrongCell, true},
		{"/gone/y", api.CodeMoved, false},
	} {
		var got api.Code
		if err := h.s.CheckServes(tc.path); err != nil {
			got = err.Code
		}
		if got != tc.want || deleted[tc.path] != tc.deleted {
			t.Errorf("%s after the restore: serves %q (want %q), deleted %v (want %v)", tc.path, got, tc.want, deleted[tc.path], tc.deleted)
		}
	}
	if err := h.s.SessionExists(s); err != nil {
		t.Errorf("session %d, whose lock node went, ended too: %v", s, err)
	}

	// Assigned after the restore, then a new leader with the same plan.
	h.ok(ensureCmd("/later", 1))
	r = h.ok(Command{Op: OpLeaderStart, ReplicaID: 2, Term: 101, Restored: plan})
	if r.Epoch != plan.Floor+1 {
		t.Fatalf("leader epoch %d at the next leader_start, want %d", r.Epoch, plan.Floor+1)
	}
	if err := h.s.CheckServes("/later/z"); err != nil || len(h.changes) != 0 {
		t.Fatalf("the plan applied twice: /later %v, changes %v", err, h.changes)
	}
}
