package fsm

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/lockservice/lockd/api"
)

const up = api.LockUpgradable

// modeCmd is sess's set_lock_mode of path to mode.
func modeCmd(sess uint64, path string, mode api.LockMode) Command {
	return Command{Op: OpSetLockMode, Path: path, Lock: mode, WriteHeader: api.WriteHeader{Session: sess}}
}

// rwQueue creates one lock node per mode under /demo/l, each on its own
// session, and returns the sessions and paths.
func rwQueue(h *harness, modes ...api.LockMode) (sess []uint64, paths []string) {
	h.tb.Helper()
	for _, m := range modes {
		id := h.open()
		sess = append(sess, id)
		paths = append(paths, h.ok(lockCmd(id, "/demo/l", m)).Node.Path)
	}
	return sess, paths
}

// heldOf lists, per path, whether it holds ("H"), waits ("w") or is gone ("-").
func heldOf(s *State, paths []string) string {
	out := ""
	for _, p := range paths {
		exists, held, _, _ := s.LockState(p)
		switch {
		case !exists:
			out += "-"
		case held:
			out += "H"
		default:
			out += "w"
		}
	}
	return out
}

func changed(h *harness, typ ChangeType) []string {
	var out []string
	for _, c := range h.changes {
		if c.Type == typ {
			out = append(out, c.Path)
		}
	}
	return out
}

// TestDowngradeWakesReadersBehind: the writer becomes a reader in place
// (same node, token and place); the readers behind it up to the next
// writer hold and are woken (the data event on the node), nobody else.
func TestDowngradeWakesReadersBehind(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	sess, paths := rwQueue(h, ex, sh, sh, ex, sh)
	if got := heldOf(h.s, paths); got != "Hwwww" {
		t.Fatalf("before: %s", got)
	}
	_, _, _, tok := h.s.LockState(paths[0])
	r := h.ok(modeCmd(sess[0], paths[0], sh))
	if r.Token != tok || r.WaitFor != "" || r.Node.Lock != sh || r.Node.Path != paths[0] {
		t.Fatalf("downgrade: %+v (token %x, want %x)", r, r.Token, tok)
	}
	if got := heldOf(h.s, paths); got != "HHHww" {
		t.Fatalf("after: %s, want HHHww", got)
	}
	if got := changed(h, ChangeData); len(got) != 1 || got[0] != paths[0] {
		t.Fatalf("wake: %v", got)
	}
	if _, _, wf, _ := h.s.LockState(paths[3]); wf != paths[2] {
		t.Fatalf("the writer behind waits for %s, want %s", wf, paths[2])
	}
	if valid, holders := h.s.CheckToken("/demo/l", tok); !valid || len(holders) != 3 {
		t.Fatalf("check: %v %v", valid, holders)
	}
	// Downgraded twice: refused (it is shared now).
	h.fail(modeCmd(sess[0], paths[0], sh), api.CodeBadRequest)
}

// TestLockModeRefusals: only the node's own session changes its mode,
// only a holding writer downgrades, and only the listed pairs.
func TestLockModeRefusals(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	sess, paths := rwQueue(h, ex, ex, sh, up)
	tests := []struct {
		name string
		cmd  Command
		code api.Code
	}{
		{"another session's node", modeCmd(sess[1], paths[0], sh), api.CodeForbidden},
		{"a waiting writer", modeCmd(sess[1], paths[1], sh), api.CodeConflict},
		{"no session", modeCmd(0, paths[0], sh), api.CodeNoSession},
		{"not a lock node", modeCmd(sess[0], "/demo/l", sh), api.CodeNoNode},
		{"gone", modeCmd(sess[0], "/demo/l/lock-9", sh), api.CodeNoNode},
		{"a reader upgrades", modeCmd(sess[2], paths[2], ex), api.CodeBadRequest},
		{"writer to writer", modeCmd(sess[0], paths[0], ex), api.CodeBadRequest},
		{"to no mode", modeCmd(sess[0], paths[0], ""), api.CodeBadRequest},
		{"to a second upgradable", modeCmd(sess[0], paths[0], up), api.CodeUpgradableTaken},
		{"outside the cell", modeCmd(sess[0], "/elsewhere/x", sh), api.CodeWrongCell},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.fail(tt.cmd, tt.code)
			if got := heldOf(h.s, paths); got != "Hwww" {
				t.Fatalf("a refusal changed the queue: %s", got)
			}
		})
	}
}

// TestUpgradeQueuesLaterReaders: the upgradable reader becomes the
// writer; the readers that held keep holding until they leave, readers
// that come later queue behind it, and it holds once the others left.
func TestUpgradeQueuesLaterReaders(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	sess, paths := rwQueue(h, sh, up, sh)
	if got := heldOf(h.s, paths); got != "HHH" {
		t.Fatalf("before: %s", got)
	}
	r := h.ok(modeCmd(sess[1], paths[1], ex))
	if r.WaitFor != paths[0] || r.Node.Lock != ex {
		t.Fatalf("upgrade: %+v", r)
	}
	late := h.open()
	lp := h.ok(lockCmd(late, "/demo/l", sh))
	if lp.WaitFor != paths[1] {
		t.Fatalf("a reader after the upgrade waits for %q, want the upgraded node", lp.WaitFor)
	}
	paths = append(paths, lp.Node.Path)
	steps := []struct {
		del  int
		want string
	}{
		{-1, "HwHw"}, {0, "-wHw"}, {2, "-H-w"},
	}
	for _, st := range steps {
		if st.del >= 0 {
			h.ok(delCmd(paths[st.del], nil))
		}
		if got := heldOf(h.s, paths); got != st.want {
			t.Fatalf("after deleting %d: %s, want %s", st.del, got, st.want)
		}
	}
	// The writer downgrades: the late reader holds with it.
	h.ok(modeCmd(sess[1], paths[1], sh))
	if got := heldOf(h.s, paths); got != "-H-H" {
		t.Fatalf("after the downgrade: %s", got)
	}
}

// TestUpgradeTokenOrder: an upgrade keeps the node's token (its create
// index), so writers are granted in token order: a writer queued behind
// the upgradable node, created before the upgrade, is granted after it
// with a higher token (a new token for the upgrade would be above it:
// mutant RWUpgradeNewToken). While the upgrade waits for the readers
// it let hold, the token holds nothing; the downgrade keeps it.
func TestUpgradeTokenOrder(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	sess, paths := rwQueue(h, up, sh, ex, sh)
	toks := make([]uint64, len(paths))
	for i, p := range paths {
		_, _, _, toks[i] = h.s.LockState(p)
	}
	r := h.ok(modeCmd(sess[0], paths[0], ex))
	if r.Token != toks[0] {
		t.Fatalf("upgraded token %x, want the node's own %x", r.Token, toks[0])
	}
	if valid, _ := h.s.CheckToken("/demo/l", toks[0]); valid {
		t.Fatal("the upgrade's token holds while a reader it let hold is still there")
	}
	h.ok(delCmd(paths[1], nil)) // the reader leaves: the write grant
	if valid, holders := h.s.CheckToken("/demo/l", toks[0]); !valid || len(holders) != 1 {
		t.Fatalf("check of the writer's token: %v %v", valid, holders)
	}
	if d := h.ok(modeCmd(sess[0], paths[0], sh)); d.Token != toks[0] {
		t.Fatalf("downgrade changed the token: %x, want %x", d.Token, toks[0])
	}
	h.ok(delCmd(paths[0], nil))
	exists, held, _, tok := h.s.LockState(paths[2])
	if !exists || !held || tok <= toks[0] {
		t.Fatalf("the writer queued behind: held %v token %x, want held with a token above the upgraded writer's %x", held, tok, toks[0])
	}
	later := h.ok(lockCmd(h.open(), "/demo/l", ex))
	if later.Token <= tok {
		t.Fatalf("a later writer's token %x, not above %x", later.Token, tok)
	}
}

// TestSecondUpgradableRefused: one upgradable node per directory; once
// it goes, another may come.
func TestSecondUpgradableRefused(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	_, paths := rwQueue(h, up)
	h.fail(lockCmd(h.open(), "/demo/l", up), api.CodeUpgradableTaken)
	h.ok(delCmd(paths[0], nil))
	h.ok(lockCmd(h.open(), "/demo/l", up))
}

// TestUpgradeWaitsOutALockDelay: a reader the upgrade let hold expires
// with a lock-delay: the other readers hold on, the writer is granted
// only at the delay's end.
func TestUpgradeWaitsOutALockDelay(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	sess, paths := rwQueue(h, up, sh)
	d := h.open()
	dc := delayedLockCmd(d, "/demo/l", sh, 1000)
	paths = append(paths, h.ok(dc).Node.Path)
	h.ok(modeCmd(sess[0], paths[0], ex))
	h.ok(expireCmd(d, h.s.Epoch()))
	since := h.idx
	if got := heldOf(h.s, paths); got != "wH-" {
		t.Fatalf("after the expiry: %s", got)
	}
	h.ok(delCmd(paths[1], nil))
	if got := heldOf(h.s, paths); got != "w--" {
		t.Fatalf("in the delay: %s", got)
	}
	h.ok(Command{Op: OpEndLockDelay, Path: "/demo/l", Since: since})
	if got := heldOf(h.s, paths); got != "H--" {
		t.Fatalf("after the delay: %s", got)
	}
}

// TestRWLockRandom: random queues of the three modes with deletes,
// expiries, downgrades and upgrades. The harness checks, after every
// entry, the invariants (an exclusive holder holds alone; one upgradable
// node per directory) and that no holder stopped holding for another's
// change; this checks that no queue deadlocks: a non-empty queue not in
// lock-delay has a holder.
func TestRWLockRandom(t *testing.T) {
	const runs, steps = 20, 150
	seed := testSeed(t)
	for run := range runs {
		rng := rand.New(rand.NewSource(seed + int64(run)))
		h := newDemo(t)
		h.ok(createCmd("/demo/l"))
		for range steps {
			randomRWStep(h, rng)
			if q, _, _ := h.s.LockQueue("/demo/l", 1000); len(q) > 0 && !q[0].Held && !anyHeld(q) {
				if _, delayed := h.s.LockDelayOf("/demo/l"); !delayed {
					t.Fatalf("run %d: deadlock: %+v", run, q)
				}
			}
		}
	}
}

func anyHeld(q []api.LockEntry) bool {
	for _, e := range q {
		if e.Held {
			return true
		}
	}
	return false
}

// randomRWStep applies one random step to the lock /demo/l.
func randomRWStep(h *harness, rng *rand.Rand) {
	q, _, _ := h.s.LockQueue("/demo/l", 1000)
	modes := []api.LockMode{ex, sh, up}
	switch k := rng.Intn(6); {
	case k <= 1 || len(q) == 0:
		c := lockCmd(h.open(), "/demo/l", modes[rng.Intn(3)])
		c.LockDelayMS = int64(rng.Intn(2)) * 1000
		h.apply(c)
	case k == 2:
		h.ok(delCmd(q[rng.Intn(len(q))].Node, nil))
	case k == 3:
		h.ok(expireCmd(q[rng.Intn(len(q))].Session, h.s.Epoch()))
	case k == 4:
		e := q[rng.Intn(len(q))]
		h.apply(modeCmd(e.Session, e.Node, modes[rng.Intn(3)]))
	default:
		if d, ok := h.s.LockDelayOf("/demo/l"); ok {
			h.ok(Command{Op: OpEndLockDelay, Path: "/demo/l", Since: d.Since})
		}
	}
}

// TestLockModeSnapshotRoundTrip: an upgrade's fields survive a snapshot.
func TestLockModeSnapshotRoundTrip(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	sess, paths := rwQueue(h, sh, up, sh)
	h.ok(modeCmd(sess[1], paths[1], ex))
	want := fmt.Sprint(h.s.LockQueue("/demo/l", 10))
	s2 := restore(t, h.snap())
	if got := fmt.Sprint(s2.LockQueue("/demo/l", 10)); got != want {
		t.Fatalf("restored queue %s, want %s", got, want)
	}
	if !bytes.Equal(snapBytes(t, s2), h.snap()) {
		t.Fatal("the restored state snapshots differently")
	}
}
