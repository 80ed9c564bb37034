package fsm

import (
	"bytes"
	"testing"

	"github.com/lockservice/lockd/api"
)

func delayedLockCmd(sess uint64, dir string, mode api.LockMode, ms int64) Command {
	c := lockCmd(sess, dir, mode)
	c.LockDelayMS = ms
	return c
}

func endDelayCmd(dir string, since uint64) Command {
	return Command{Op: OpEndLockDelay, Path: dir, Since: since}
}

// held reports LockState's held and wait-for of a lock node.
func (h *harness) held(path string) (bool, string) {
	_, held, w, _ := h.s.LockState(path)
	return held, w
}

func hasChange(changes []Change, typ ChangeType, path string) bool {
	for _, c := range changes {
		if c.Type == typ && c.Path == path {
			return true
		}
	}
	return false
}

// TestLockDelayExclusive: a holder whose session expires leaves its lock
// to nobody until the end_lock_delay naming that release; a clean delete
// hands over at once; a waiter that dies starts no delay.
func TestLockDelayExclusive(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	a, b, c := h.open(), h.open(), h.open()
	na := h.ok(delayedLockCmd(a, "/demo/l", ex, 5000)).Node.Path
	nb := h.ok(delayedLockCmd(b, "/demo/l", ex, 5000)).Node.Path

	exp := expireCmd(a, h.s.Epoch())
	exp.AtMS = 1_700_000_000_000
	h.ok(exp)
	release := h.idx
	if !hasChange(h.changes, ChangeLockDelay, "/demo/l") {
		t.Fatalf("expiry of the holder: changes %v, want a lock-delay on /demo/l", h.changes)
	}
	if held, w := h.held(nb); held || w != "/demo/l" {
		t.Fatalf("next in line during the delay: held %v, waits for %q; want waiting on the directory", held, w)
	}
	if d, ok := h.s.LockDelayOf("/demo/l"); !ok || d != (LockDelay{Dir: "/demo/l", Since: release, MS: 5000, AtMS: exp.AtMS}) {
		t.Fatalf("delay %+v %v", d, ok)
	}
	if valid, holders := h.s.CheckToken("/demo/l", 0); valid || len(holders) != 0 {
		t.Fatalf("holders during the delay: %v", holders)
	}
	nc := h.ok(delayedLockCmd(c, "/demo/l", ex, 2000))
	if nc.WaitFor != nb {
		t.Fatalf("a new node waits for %q, want its predecessor %s", nc.WaitFor, nb)
	}
	q, _, _ := h.s.LockQueue("/demo/l", 10)
	if len(q) != 2 || q[0].Held || q[1].Held {
		t.Fatalf("queue during the delay: %+v", q)
	}

	h.ok(endDelayCmd("/demo/l", release-1)) // names another release: nothing
	if held, _ := h.held(nb); held || len(h.changes) != 0 {
		t.Fatalf("an end naming another release ended the delay")
	}
	h.ok(endDelayCmd("/demo/l", release))
	if held, _ := h.held(nb); !held || !hasChange(h.changes, ChangeLockDelayEnded, "/demo/l") {
		t.Fatalf("after the end: held %v, changes %v", held, h.changes)
	}
	if typ, fire := h.s.WatchCheck("/demo/l", api.WatchData, release); !fire || typ != api.EventLockDelayEnded {
		t.Fatalf("a re-armed watch on the directory from before the end: %q %v", typ, fire)
	}
	if _, ok := h.s.LockDelayOf("/demo/l"); ok {
		t.Fatal("still in delay")
	}
	_ = na

	// A clean release (the holder deletes its node) hands over at once.
	h.ok(req(Command{Op: OpDelete, Path: nb}, b, 1, 0))
	if held, _ := h.held(nc.Node.Path); !held {
		t.Fatal("a clean release did not hand over at once")
	}
	// A waiter whose session ends starts no delay.
	d := h.open()
	h.ok(delayedLockCmd(d, "/demo/l", ex, 5000))
	h.ok(closeCmd(d))
	if hasChange(h.changes, ChangeLockDelay, "/demo/l") {
		t.Fatal("a waiter's end started a lock-delay")
	}
	// A holder's close while holding is unclean: a delay.
	h.ok(closeCmd(c))
	if !hasChange(h.changes, ChangeLockDelay, "/demo/l") {
		t.Fatal("closing the session of a holder started no lock-delay")
	}
	// Without a lock-delay, an expiry hands over at once.
	h2 := newDemo(t)
	h2.ok(createCmd("/demo/l"))
	x, y := h2.open(), h2.open()
	h2.ok(lockCmd(x, "/demo/l", ex))
	ny := h2.ok(lockCmd(y, "/demo/l", ex)).Node.Path
	h2.ok(expireCmd(x, h2.s.Epoch()))
	if held, _ := h2.held(ny); !held {
		t.Fatal("no lock-delay, yet the next waiter does not hold")
	}
}

// TestLockDelayShared: the other shared holders keep holding through a
// delay; nobody else is granted, not even a new shared node; a second
// unclean release restarts the delay with the longer length.
func TestLockDelayShared(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	s1, s2, w, s3 := h.open(), h.open(), h.open(), h.open()
	n1 := h.ok(delayedLockCmd(s1, "/demo/l", sh, 30_000)).Node.Path
	h.ok(delayedLockCmd(s2, "/demo/l", sh, 5000))
	nw := h.ok(lockCmd(w, "/demo/l", ex)).Node.Path

	h.ok(expireCmd(s2, h.s.Epoch()))
	first := h.idx
	if held, _ := h.held(n1); !held {
		t.Fatal("the other shared holder lost the lock in the delay")
	}
	if held, wf := h.held(nw); held || wf != n1 {
		t.Fatalf("writer: held %v waits %q; want waiting for %s", held, wf, n1)
	}
	r := h.ok(lockCmd(s3, "/demo/l", sh))
	if r.WaitFor != nw {
		t.Fatalf("a new reader behind the writer waits for %q", r.WaitFor)
	}

	h.ok(expireCmd(s1, h.s.Epoch()))
	second := h.idx
	if d, _ := h.s.LockDelayOf("/demo/l"); d.Since != second || d.MS != 30_000 {
		t.Fatalf("restarted delay %+v, want since %d for 30 s", d, second)
	}
	if held, wf := h.held(nw); held || wf != "/demo/l" {
		t.Fatalf("writer after both readers died: held %v waits %q", held, wf)
	}
	h.ok(endDelayCmd("/demo/l", first))
	if held, _ := h.held(nw); held {
		t.Fatal("the end of the first release ended the restarted delay")
	}
	before := h.snap()
	restored := restore(t, before)
	if !bytes.Equal(snapBytes(t, restored), before) {
		t.Fatal("a snapshot does not keep the delay byte for byte")
	}
	if _, ok := restored.LockDelayOf("/demo/l"); !ok {
		t.Fatal("the delay did not survive a snapshot")
	}
	h.ok(endDelayCmd("/demo/l", second))
	if held, _ := h.held(nw); !held {
		t.Fatal("writer not granted after the delay")
	}
	if err := h.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}

	// Readers only: a new reader during the delay waits for it.
	h2 := newDemo(t)
	h2.ok(createCmd("/demo/r"))
	a, b, c := h2.open(), h2.open(), h2.open()
	na := h2.ok(lockCmd(a, "/demo/r", sh)).Node.Path
	h2.ok(delayedLockCmd(b, "/demo/r", sh, 1000))
	h2.ok(expireCmd(b, h2.s.Epoch()))
	if held, _ := h2.held(na); !held {
		t.Fatal("reader a lost the lock")
	}
	if r := h2.ok(lockCmd(c, "/demo/r", sh)); r.WaitFor != "/demo/r" {
		t.Fatalf("a new reader during the delay waits for %q, want the directory", r.WaitFor)
	}
}

func TestLockDelayBounds(t *testing.T) {
	h := newDemo(t)
	s := h.open()
	for _, tc := range []struct {
		name string
		cmd  Command
	}{
		{"negative", delayedLockCmd(s, "/demo/l", ex, -1)},
		{"over the limit", delayedLockCmd(s, "/demo/l", ex, api.MaxLockDelay.Milliseconds()+1)},
		{"not a lock node", Command{Op: OpCreate, Path: "/demo/x", LockDelayMS: 10}},
	} {
		c := tc.cmd
		c.MakeParents = true
		if r := h.fail(c, api.CodeBadRequest); r.Err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	c := delayedLockCmd(s, "/demo/l", ex, api.MaxLockDelay.Milliseconds())
	c.MakeParents = true
	h.ok(c)
}
