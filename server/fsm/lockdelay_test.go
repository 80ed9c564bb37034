package fsm

import (
	"bytes"
	"strings"
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

// TestLockDelayOutlivesItsDirectory: deleting an empty lock directory in
// lock-delay does not end the delay (issue 23, finding 8): a lock node in
// the directory made again waits for the end_lock_delay naming the
// release, its sequence continues where the deleted directory's stopped,
// its fencing token is above every earlier one, and the kept delay
// survives a snapshot. Made with make_parents or by a plain create, and
// ended while the directory is gone, alike.
func TestLockDelayOutlivesItsDirectory(t *testing.T) {
	for _, tc := range []struct {
		name         string
		makeParents  bool // the lock's create makes the directory again
		endWhileGone bool // the delay ends before the directory is back
	}{
		{"recreated by a create", false, false},
		{"recreated by make_parents", true, false},
		{"ended while gone", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newDemo(t)
			h.ok(createCmd("/demo/l"))
			a, b := h.open(), h.open()
			r := h.ok(delayedLockCmd(a, "/demo/l", ex, 30_000))
			h.ok(expireCmd(a, h.s.Epoch()))
			release := h.idx
			h.ok(delCmd("/demo/l", nil))
			if _, ok := h.s.LockDelayOf("/demo/l"); !ok {
				t.Fatal("deleting the empty lock directory ended its lock-delay")
			}
			if ds := h.s.LockDelays(); len(ds) != 1 || ds[0].Since != release {
				t.Fatalf("delays %+v: a new leader must still time the kept one", ds)
			}
			restored := restore(t, h.snap())
			if _, ok := restored.LockDelayOf("/demo/l"); !ok {
				t.Fatal("the kept delay did not survive a snapshot")
			}
			if !bytes.Equal(snapBytes(t, restored), h.snap()) {
				t.Fatal("a snapshot does not keep the deleted directory's delay byte for byte")
			}
			if tc.endWhileGone {
				h.ok(endDelayCmd("/demo/l", release))
				if !hasChange(h.changes, ChangeLockDelayEnded, "/demo/l") {
					t.Fatalf("the end of a kept delay: changes %v", h.changes)
				}
			}
			if !tc.makeParents {
				h.ok(createCmd("/demo/l"))
			}
			c := delayedLockCmd(b, "/demo/l", ex, 30_000)
			c.MakeParents = tc.makeParents
			rb := h.ok(c)
			if rb.Token <= r.Token {
				t.Fatalf("token %d after %d: a fencing token must rise", rb.Token, r.Token)
			}
			if tc.endWhileGone {
				if held, _ := h.held(rb.Node.Path); !held {
					t.Fatal("not granted after the delay ended")
				}
				return
			}
			if rb.Node.Path == r.Node.Path {
				t.Fatalf("lock node %s again: the sequence restarted in the delay", rb.Node.Path)
			}
			if held, w := h.held(rb.Node.Path); held || w != "/demo/l" {
				t.Fatalf("granted %v (waits for %q) inside the lock-delay of the deleted directory", held, w)
			}
			h.ok(endDelayCmd("/demo/l", release))
			if held, _ := h.held(rb.Node.Path); !held {
				t.Fatal("not granted after the delay")
			}
			if _, ok := h.s.LockDelayOf("/demo/l"); ok {
				t.Fatal("still in delay after its end")
			}
		})
	}
}

// TestDeletedLockDelaysBound: the cell keeps the delays of at most
// MaxDeletedLockDelays deleted lock directories; past it the delete of
// one more directory in lock-delay is refused limit_exceeded and changes
// nothing, and once a kept delay ends there is room again.
func TestDeletedLockDelaysBound(t *testing.T) {
	h := newDemo(t)
	h.s.limits.deletedDelays = 1
	releases := map[string]uint64{}
	for _, dir := range []string{"/demo/a", "/demo/b"} {
		h.ok(createCmd(dir))
		s := h.open()
		h.ok(delayedLockCmd(s, dir, ex, 10_000))
		h.ok(expireCmd(s, h.s.Epoch()))
		releases[dir] = h.idx
	}
	h.ok(delCmd("/demo/a", nil))
	r := h.fail(delCmd("/demo/b", nil), api.CodeLimitExceeded)
	if !strings.Contains(r.Err.Message, "MaxDeletedLockDelays") {
		t.Fatalf("refusal %v does not name the limit", r.Err)
	}
	if _, ok := h.s.nodes["/demo/b"]; !ok {
		t.Fatal("a refused delete removed the directory")
	}
	h.ok(endDelayCmd("/demo/a", releases["/demo/a"]))
	h.ok(delCmd("/demo/b", nil))
	if ds := h.s.LockDelays(); len(ds) != 1 || ds[0].Dir != "/demo/b" {
		t.Fatalf("delays %+v, want only /demo/b's kept", ds)
	}
	// A directory not in lock-delay is deleted whatever the table holds.
	h.ok(createCmd("/demo/c"))
	h.ok(delCmd("/demo/c", nil))
}

// delayedDir makes dir, owned by tenant, a lock directory in lock-delay
// (its holder's session expired holding it) and returns the release's
// index.
func delayedDir(h *harness, dir, tenant string) uint64 {
	h.tb.Helper()
	h.ok(Command{Op: OpCreate, Path: dir, Tenant: tenant})
	s := h.open()
	h.ok(delayedLockCmd(s, dir, ex, 10_000))
	h.ok(expireCmd(s, h.s.Epoch()))
	return h.idx
}

// TestDeletedLockDelaysPerTenant: the kept delays of deleted lock
// directories are bounded per tenant (MaxDeletedLockDelaysPerTenant) as
// well as per cell, so one tenant cannot fill the cell's table and stop
// the others deleting theirs; a refused delete is limit_exceeded naming
// the bound and changes nothing; a delay that ends, or is taken back by
// a directory made again, frees its tenant's room.
func TestDeletedLockDelaysPerTenant(t *testing.T) {
	type step struct {
		op     string // "del", "end" (the leader ends the kept delay), "make" (again)
		dir    string
		tenant string
		want   api.Code // "" ok
		names  string   // the limit a refusal names
	}
	const perTenant, perCell = "MaxDeletedLockDelaysPerTenant", "MaxDeletedLockDelays"
	cases := []struct {
		name  string
		steps []step
	}{
		{"one tenant stops at its bound, another deletes still", []step{
			{"del", "/demo/a1", "a", "", ""}, {"del", "/demo/a2", "a", "", ""},
			{"del", "/demo/a3", "a", api.CodeLimitExceeded, perTenant},
			{"del", "/demo/b1", "b", "", ""},
		}},
		{"the cell's bound holds across tenants", []step{
			{"del", "/demo/a1", "a", "", ""}, {"del", "/demo/b1", "b", "", ""}, {"del", "/demo/c1", "c", "", ""},
			{"del", "/demo/d1", "d", api.CodeLimitExceeded, perCell},
		}},
		{"no tenant: only the cell's bound", []step{
			{"del", "/demo/x1", "", "", ""}, {"del", "/demo/x2", "", "", ""}, {"del", "/demo/x3", "", "", ""},
			{"del", "/demo/x4", "", api.CodeLimitExceeded, perCell},
		}},
		{"an ended delay frees its tenant's room", []step{
			{"del", "/demo/a1", "a", "", ""}, {"del", "/demo/a2", "a", "", ""},
			{"end", "/demo/a1", "a", "", ""},
			{"del", "/demo/a3", "a", "", ""},
		}},
		{"a directory made again takes its delay back", []step{
			{"del", "/demo/a1", "a", "", ""}, {"del", "/demo/a2", "a", "", ""},
			{"make", "/demo/a1", "a", "", ""},
			{"del", "/demo/a3", "a", "", ""},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newDemo(t)
			h.s.limits.deletedDelays, h.s.limits.deletedDelaysPerTenant = 3, 2
			releases := map[string]uint64{}
			for _, st := range tc.steps {
				if _, made := releases[st.dir]; !made && st.op == "del" {
					releases[st.dir] = delayedDir(h, st.dir, st.tenant)
				}
			}
			for i, st := range tc.steps {
				switch st.op {
				case "end":
					h.ok(endDelayCmd(st.dir, releases[st.dir]))
					continue
				case "make":
					h.ok(Command{Op: OpCreate, Path: st.dir, Tenant: st.tenant})
					continue
				}
				if st.want == "" {
					h.ok(delCmd(st.dir, nil))
					continue
				}
				kept, by := len(h.s.lockDelays), h.s.keptBy[st.tenant]
				r := h.fail(delCmd(st.dir, nil), st.want)
				if !strings.Contains(r.Err.Message, st.names+")") {
					t.Fatalf("step %d: refusal %v does not name %s", i, r.Err, st.names)
				}
				if _, ok := h.s.nodes[st.dir]; !ok || len(h.s.lockDelays) != kept || h.s.keptBy[st.tenant] != by {
					t.Fatalf("step %d: a refused delete changed the state", i)
				}
			}
		})
	}
}

// TestKeptDelayOutlivesEphemeralAtItsPath (issue 23, attack review 3): a
// lock-delay kept for a deleted lock directory, with its sequence
// counter, is taken back only by a node that can be a lock directory (a
// persistent one). An ephemeral node made at the path meanwhile, however
// it goes (its session closes or expires, it is deleted, a seal removes
// it), leaves the delay in force and the counter where it was; a seal
// while it is there moves the delay with the prefix; a lock in the
// directory made again waits, and its sequence goes on.
func TestKeptDelayOutlivesEphemeralAtItsPath(t *testing.T) {
	const dir = "/demo/kd/job"
	for _, tc := range []struct {
		name string
		end  func(h *harness, e uint64) // ends the ephemeral node at dir
	}{
		{"its session closes", func(h *harness, e uint64) { h.ok(closeCmd(e)) }},
		{"its session expires", func(h *harness, e uint64) { h.ok(expireCmd(e, h.s.Epoch())) }},
		{"it is deleted", func(h *harness, e uint64) {
			h.ok(Command{Op: OpDelete, Path: dir, WriteHeader: api.WriteHeader{Session: e}})
		}},
		{"a seal removes it, the move aborts", func(h *harness, e uint64) {
			h.ok(sealCmd("/demo", "other", 3))
			var kept bool
			for _, n := range exportAll(h.tb.(*testing.T), h.s, "/demo") {
				kept = kept || n.Path == dir && n.Kept && n.DelayMS == 30_000
			}
			if !kept {
				h.tb.Errorf("the seal does not move the delay kept at %s", dir)
			}
			h.ok(Command{Op: OpUnsealPrefix, Path: "/demo", DirIndex: 4})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newDemo(t)
			first := keptDelayAt(h, dir, 30_000)
			release, ok := h.s.LockDelayOf(dir)
			if !ok {
				t.Fatal("no delay kept for the deleted directory")
			}
			e := h.open()
			h.ok(ephCmd(e, dir))
			if d, ok := h.s.LockDelayOf(dir); !ok || d.Since != release.Since {
				t.Fatalf("with an ephemeral node at %s: delay %+v (%v), want the kept one %+v", dir, d, ok, release)
			}
			tc.end(h, e)
			if _, there := h.s.nodes[dir]; there {
				t.Fatalf("the ephemeral node at %s is still there", dir)
			}
			if d, ok := h.s.LockDelayOf(dir); !ok || d.Since != release.Since || d.MS != 30_000 {
				t.Fatalf("after the ephemeral node at %s went: delay %+v (%v), want %+v", dir, d, ok, release)
			}
			h = harnessOn(t, restore(t, h.snap()))
			b := h.open()
			c := delayedLockCmd(b, dir, ex, 30_000)
			c.MakeParents = true
			r := h.ok(c)
			if seqOf(t, r.Node.Path) != seqOf(t, first)+1 {
				t.Errorf("lock node %s after %s: the sequence restarted", r.Node.Path, first)
			}
			if r.WaitFor != dir {
				t.Fatalf("granted (wait_for %q) inside the kept lock-delay", r.WaitFor)
			}
			h.ok(endDelayCmd(dir, release.Since))
			if held, _ := h.held(r.Node.Path); !held {
				t.Fatal("not granted once the kept delay ended")
			}
		})
	}
}
