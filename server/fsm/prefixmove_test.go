package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestMoveCarriesLockDelays (issue 23, finding 7): a lock held at the seal
// is granted on the new cell to nobody before its holder's lease plus its
// lock-delay may have run, timed from the entry that first serves the
// prefix there; a lock-delay in force at the seal moves with the prefix;
// the copy's digest covers both; the state survives a snapshot.
func TestMoveCarriesLockDelays(t *testing.T) {
	from := newDemo(t)
	holder := from.open()
	from.ok(createCmd("/demo/held"))
	lk := lockCmd(holder, "/demo/held", api.LockExclusive)
	lk.LockDelayMS = 3000
	from.ok(lk)
	released := from.open()
	from.ok(createCmd("/demo/delayed"))
	lk = lockCmd(released, "/demo/delayed", api.LockExclusive)
	lk.LockDelayMS = 4000
	from.ok(lk)
	from.ok(Command{Op: OpCloseSession, WriteHeader: api.WriteHeader{Session: released}, AtMS: 1}) // an unclean release: /demo/delayed in delay
	from.ok(createCmd("/demo/free"))
	seal := from.ok(sealCmd("/demo", "other", 3))
	lease := from.s.sessions[holder].leaseMS
	nodes, more, err := from.s.ExportPrefix("/demo", "", 100)
	if err != nil || more {
		t.Fatal(err, more)
	}
	got := map[string]int64{}
	for _, n := range nodes {
		got[n.Path] = n.DelayMS
	}
	want := map[string]int64{"/demo": 0, "/demo/held": lease + 3000, "/demo/delayed": 4000, "/demo/free": 0}
	for p, ms := range want {
		if got[p] != ms {
			t.Errorf("export of %s carries a delay of %d ms, want %d", p, got[p], ms)
		}
	}

	to := newHarness(t)
	to.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1})
	last := to.ok(stagePage("/demo", 2, 9, 0, true, nodes...))
	if last.Digest != seal.Digest || last.Count != seal.Count {
		t.Fatalf("copy %d %s, seal %d %s", last.Count, last.Digest, seal.Count, seal.Digest)
	}
	to = harnessOn(t, restore(t, to.snap())) // the staged delays survive a snapshot
	to.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 2})
	arrive := ensureCmd("/demo", 2)
	arrive.Staged, arrive.AtMS = true, 12345
	to.ok(arrive)
	serveIndex := to.idx
	for p, ms := range want {
		d, ok := to.s.LockDelayOf(p)
		switch {
		case ms == 0 && ok:
			t.Errorf("%s is in delay %+v on the new cell, want none", p, d)
		case ms != 0 && (!ok || d.MS != ms || d.Since != serveIndex || d.AtMS != 12345):
			t.Errorf("%s on the new cell: delay %+v (%v), want %d ms from index %d", p, d, ok, ms, serveIndex)
		}
	}
	sess := to.open()
	r := to.ok(lockCmd(sess, "/demo/held", api.LockExclusive))
	if r.WaitFor != "/demo/held" {
		t.Fatalf("a lock held at the seal is granted on the new cell at once: wait_for %q", r.WaitFor)
	}
	if r := to.ok(lockCmd(sess, "/demo/free", api.LockExclusive)); r.WaitFor != "" {
		t.Fatalf("a free lock waits after the move: %q", r.WaitFor)
	}
	to.ok(Command{Op: OpEndLockDelay, Path: "/demo/held", Since: serveIndex})
	if _, held, _, _ := to.s.LockState(r.Node.Path); !held {
		t.Fatalf("not granted once the moved delay ended")
	}
	if err := to.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// keptDelayAt makes dir a lock directory whose holder's session expires
// while it holds with a lock-delay of ms, then deletes the empty
// directory and its parent (the delay and counter are kept without a
// node). It returns the holder's lock node.
func keptDelayAt(h *harness, dir string, ms int64) string {
	h.tb.Helper()
	s := h.open()
	c := delayedLockCmd(s, dir, api.LockExclusive, ms)
	c.MakeParents = true
	holder := h.ok(c).Node.Path
	h.ok(expireCmd(s, h.s.Epoch()))
	h.ok(delCmd(dir, nil))
	return holder
}

// exportAll exports a sealed prefix in pages of two entries.
func exportAll(t *testing.T, s *State, prefix string) []api.ExportedNode {
	t.Helper()
	var out []api.ExportedNode
	after := ""
	for range 1000 {
		page, more, err := s.ExportPrefix(prefix, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if !more {
			return out
		}
		after = page[len(page)-1].Path
	}
	t.Fatal("export does not end")
	return nil
}

// seqOf is the sequence number a sequential node's name ends with.
func seqOf(t *testing.T, path string) uint64 {
	t.Helper()
	var v uint64
	if _, err := fmt.Sscanf(path[len(path)-seqDigits:], "%d", &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// moveTo stages an export on to (epoch, driver generation gen, one page)
// and serves it there at wall clock atMS; it returns the serving index.
func moveTo(t *testing.T, to *harness, seal Result, nodes []api.ExportedNode, epoch, gen uint64, atMS int64) uint64 {
	t.Helper()
	last := to.ok(stagePage("/demo", epoch, gen, 0, true, nodes...))
	if last.Digest != seal.Digest || last.Count != seal.Count {
		t.Fatalf("copy %d %s, seal %d %s", last.Count, last.Digest, seal.Count, seal.Digest)
	}
	arrive := ensureCmd("/demo", epoch)
	arrive.Staged, arrive.AtMS = true, atMS
	to.ok(arrive)
	return to.idx
}

// TestMoveCarriesKeptDelays (issue 23, findings 7 and 8): the delay kept
// for a lock directory deleted during it moves with its prefix, with the
// directory's sequence counter, as an export entry without a node; the
// new cell keeps it from its first serving entry (timed from there), so
// a lock made again at the path waits and its node's sequence goes on.
// Moved back while kept, the counter still does not go back.
func TestMoveCarriesKeptDelays(t *testing.T) {
	const dir = "/demo/q/locks"
	from := newDemo(t)
	first := keptDelayAt(from, dir, 5000)
	from.ok(delCmd("/demo/q", nil))
	seal := from.ok(sealCmd("/demo", "other", 3))
	nodes := exportAll(t, from.s, "/demo")
	var kept *api.ExportedNode
	for i, n := range nodes {
		if n.Path == dir {
			kept = &nodes[i]
		}
	}
	if kept == nil || !kept.Kept || kept.DelayMS != 5000 || kept.NextSeq != seqOf(t, first)+1 {
		t.Fatalf("export %+v: want %s kept, 5000 ms, next sequence %d", nodes, dir, seqOf(t, first)+1)
	}

	to := newHarness(t)
	to.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1})
	to.ok(stagePage("/demo", 2, 9, 0, false, nodes...))
	to = harnessOn(t, restore(t, to.snap())) // a staged kept delay survives a snapshot
	to.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 2})
	if ds := to.s.LockDelays(); len(ds) != 0 {
		t.Fatalf("a staged copy's kept delay is in force before the copy is served: %+v", ds)
	}
	to.ok(Command{Op: OpDropPrefix, Path: "/demo"}) // that move aborted: its copy goes
	if _, ok := to.s.LockDelayOf(dir); ok {
		t.Fatal("an aborted copy's kept delay stayed")
	}
	serve := moveTo(t, to, seal, nodes, 2, 10, 777)
	d, ok := to.s.LockDelayOf(dir)
	if !ok || d.Since != serve || d.MS != 5000 || d.AtMS != 777 {
		t.Fatalf("kept delay on the new cell: %+v (%v), want 5000 ms from index %d", d, ok, serve)
	}
	if ds := to.s.LockDelays(); len(ds) != 1 || ds[0].Dir != dir {
		t.Fatalf("delays %+v: the new leader must time the moved kept delay", ds)
	}
	sess := to.open()
	c := delayedLockCmd(sess, dir, api.LockExclusive, 5000)
	c.MakeParents = true
	r := to.ok(c)
	if seqOf(t, r.Node.Path) != seqOf(t, first)+1 || r.WaitFor != dir {
		t.Fatalf("lock %s waits for %q on the new cell; want sequence %d waiting for the kept delay", r.Node.Path, r.WaitFor, seqOf(t, first)+1)
	}

	// The waiter goes, the directory is deleted in its delay again (kept
	// on the new cell with a higher counter), and the prefix moves back
	// to the first cell, which still keeps its own, older, copy.
	to.ok(expireCmd(sess, to.s.Epoch()))
	to.ok(delCmd(dir, nil))
	back := to.ok(sealCmd("/demo", "demo-cell", 20))
	moveTo(t, from, back, exportAll(t, to.s, "/demo"), 3, 21, 888)
	from.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 5})
	sess = from.open()
	c = delayedLockCmd(sess, dir, api.LockExclusive, 5000)
	c.MakeParents = true
	r = from.ok(c)
	if seqOf(t, r.Node.Path) != seqOf(t, first)+2 || r.WaitFor != dir {
		t.Fatalf("moved back: lock %s waits for %q; want sequence %d (the counter never goes back) waiting", r.Node.Path, r.WaitFor, seqOf(t, first)+2)
	}
}

// TestStageKeptRefusals: a stage page's kept lock-delays (entries without
// a node) are checked before anything changes: under the prefix but not
// its root, without value or version, with a delay; in path order across
// pages, at no node of the copy (nor a node where the copy keeps one);
// and within the cell's bound with the delays the cell keeps.
func TestStageKeptRefusals(t *testing.T) {
	root := api.ExportedNode{Path: "/moving", Version: 1}
	kept := func(p string) api.ExportedNode {
		return api.ExportedNode{Path: p, DelayMS: 1000, NextSeq: 3, Kept: true}
	}
	node := func(p string) api.ExportedNode { return api.ExportedNode{Path: p, Version: 1} }
	with := func(e api.ExportedNode, f func(*api.ExportedNode)) api.ExportedNode { f(&e); return e }
	cases := []struct {
		name   string
		page0  []api.ExportedNode // staged first (accepted)
		page1  []api.ExportedNode // refused
		limit  int
		want   api.Code
		during string
	}{
		{"at the root", nil, []api.ExportedNode{kept("/moving")}, 0, api.CodeBadRequest, ""},
		{"with a value", nil, []api.ExportedNode{with(kept("/moving/k"), func(e *api.ExportedNode) { e.Value = []byte("v") })}, 0, api.CodeBadRequest, ""},
		{"with a version", nil, []api.ExportedNode{with(kept("/moving/k"), func(e *api.ExportedNode) { e.Version = 2 })}, 0, api.CodeBadRequest, ""},
		{"without a delay", nil, []api.ExportedNode{with(kept("/moving/k"), func(e *api.ExportedNode) { e.DelayMS = 0 })}, 0, api.CodeBadRequest, ""},
		{"past the moved-delay bound", nil, []api.ExportedNode{with(kept("/moving/k"), func(e *api.ExportedNode) { e.DelayMS = api.MaxMovedLockDelay.Milliseconds() + 1 })}, 0, api.CodeBadRequest, ""},
		{"outside the prefix", nil, []api.ExportedNode{kept("/other/k")}, 0, api.CodeBadRequest, ""},
		{"where the copy has a node", []api.ExportedNode{node("/moving/k")}, []api.ExportedNode{kept("/moving/k")}, 0, api.CodeBadRequest, ""},
		{"a node where the copy keeps one", []api.ExportedNode{kept("/moving/k")}, []api.ExportedNode{node("/moving/k")}, 0, api.CodeBadRequest, ""},
		{"out of order across pages", []api.ExportedNode{kept("/moving/m")}, []api.ExportedNode{kept("/moving/k")}, 0, api.CodeBadRequest, ""},
		{"past the cell's bound", []api.ExportedNode{kept("/moving/k")}, []api.ExportedNode{kept("/moving/m"), kept("/moving/n")}, 2, api.CodeLimitExceeded, "/demo/x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newDemo(t)
			if tc.limit > 0 {
				h.s.limits.deletedDelays = tc.limit
			}
			if tc.during != "" { // the cell keeps one delay of its own
				delayedDir(h, tc.during, "")
				h.ok(delCmd(tc.during, nil))
			}
			h.ok(stagePage("/moving", 2, 5, 0, false, append([]api.ExportedNode{root}, tc.page0...)...))
			before := snapNoIndex(t, h.s)
			h.fail(stagePage("/moving", 2, 5, 1, true, tc.page1...), tc.want)
			if !bytes.Equal(before, snapNoIndex(t, h.s)) {
				t.Fatal("a refused page changed the state")
			}
		})
	}
}

// TestAbortedMoveStartsDelays (issue 23, attack review 3): a move that
// aborts after its seal took a held lock from its holder (the seal
// deleted the lock node, the holder may not know yet) grants that lock
// on the old cell to nobody before the holder's lease plus its
// lock-delay may have run, timed from the unseal entry as the new cell
// would time it from its first serving entry; a delay in force at the
// seal runs at least as long; the move record goes with the unseal, and
// the state survives a snapshot.
func TestAbortedMoveStartsDelays(t *testing.T) {
	h := newDemo(t)
	holder := h.open()
	h.ok(createCmd("/demo/held"))
	h.ok(delayedLockCmd(holder, "/demo/held", api.LockExclusive, 3000))
	released := h.open()
	h.ok(createCmd("/demo/delayed"))
	h.ok(delayedLockCmd(released, "/demo/delayed", api.LockExclusive, 4000))
	h.ok(Command{Op: OpCloseSession, WriteHeader: api.WriteHeader{Session: released}, AtMS: 1})
	h.ok(createCmd("/demo/free"))
	lease := h.s.sessions[holder].leaseMS
	h.ok(sealCmd("/demo", "other", 3))
	unseal := Command{Op: OpUnsealPrefix, Path: "/demo", DirIndex: 4, AtMS: 4242}
	h.ok(unseal)
	at := h.idx
	want := map[string]int64{"/demo/held": lease + 3000, "/demo/delayed": 4000}
	for p, ms := range want {
		d, ok := h.s.LockDelayOf(p)
		if !ok || d.Since != at || d.MS != ms || d.AtMS != 4242 {
			t.Errorf("%s after the aborted move: delay %+v (%v), want %d ms from the unseal at index %d", p, d, ok, ms, at)
		}
		if !hasChange(h.changes, ChangeLockDelay, p) {
			t.Errorf("the unseal reports no lock-delay on %s (changes %v): the leader would not time its end", p, h.changes)
		}
		if m := h.s.nodes[p].move; m != nil {
			t.Errorf("%s keeps its move record %+v after the abort", p, *m)
		}
	}
	if _, ok := h.s.LockDelayOf("/demo/free"); ok {
		t.Error("a lock free at the seal is in delay after the abort")
	}
	if ds := h.s.LockDelays(); len(ds) != 2 {
		t.Errorf("delays %+v: a new leader must time both", ds)
	}
	h = harnessOn(t, restore(t, h.snap()))
	sess := h.open()
	r := h.ok(lockCmd(sess, "/demo/held", api.LockExclusive))
	if r.WaitFor != "/demo/held" {
		t.Fatalf("after the aborted move the lock held at the seal is granted at once (wait_for %q)", r.WaitFor)
	}
	if f := h.ok(lockCmd(sess, "/demo/free", api.LockExclusive)); f.WaitFor != "" {
		t.Fatalf("a free lock waits after the abort: %q", f.WaitFor)
	}
	h.ok(endDelayCmd("/demo/held", at))
	if held, _ := h.held(r.Node.Path); !held {
		t.Fatal("not granted once the delay the abort started ended")
	}
	// Sealed again for another move: the new holder's lease moves (it
	// holds without a lock-delay), nothing of the aborted move.
	h.ok(sealCmd("/demo", "other", 9))
	for _, n := range exportAll(t, h.s, "/demo") {
		if n.Path == "/demo/held" && n.DelayMS != h.s.sessions[sess].leaseMS {
			t.Errorf("the second seal carries %d ms on %s, want the new holder's lease %d ms", n.DelayMS, n.Path, h.s.sessions[sess].leaseMS)
		}
	}
}
