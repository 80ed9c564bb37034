package fsm

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

// recipeLock is a lock recipe's create: make_parents, the directories it
// makes containers.
func recipeLock(sess uint64, dir string, mode api.LockMode, delayMS int64) Command {
	c := delayedLockCmd(sess, dir, mode, delayMS)
	c.MakeParents, c.Container = true, true
	return c
}

func exists(s *State, p string) bool {
	_, ok := s.Get(p)
	return ok
}

// TestContainerDeletedWithLastChild: the directories a recipe made go in
// the entry that removes their last child (a delete, a session's end),
// up the path; a directory a user made stays; the node count returns.
func TestContainerDeletedWithLastChild(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/users")) // a user's directory: persistent
	base := h.s.NumNodes()
	a, b := h.open(), h.open()
	ra := h.ok(recipeLock(a, "/demo/users/e1/lock", ex, 0))
	if n, _ := h.s.Get("/demo/users/e1/lock"); !n.Container {
		t.Fatalf("recipe directory %+v is no container", n)
	}
	if n, _ := h.s.Get("/demo/users"); n.Container {
		t.Fatal("the user's directory became a container")
	}
	h.ok(recipeLock(b, "/demo/users/e1/lock", ex, 0))
	h.ok(delCmd(ra.Node.Path, nil))
	if !exists(h.s, "/demo/users/e1/lock") {
		t.Fatal("a container with a child left was deleted")
	}
	h.ok(closeCmd(b))
	for _, p := range []string{"/demo/users/e1/lock", "/demo/users/e1"} {
		if exists(h.s, p) {
			t.Fatalf("%s outlived its last child", p)
		}
	}
	if got := changed(h, ChangeDeleted); len(got) != 3 || got[1] != "/demo/users/e1/lock" || got[2] != "/demo/users/e1" {
		t.Fatalf("deletions %v: the lock node, then its containers upward", got)
	}
	if !exists(h.s, "/demo/users") || h.s.NumNodes() != base {
		t.Fatalf("nodes %d, want %d, with /demo/users kept", h.s.NumNodes(), base)
	}
	// Container without make_parents: refused.
	c := lockCmd(a, "/demo/users", ex)
	c.Container = true
	h.fail(c, api.CodeBadRequest)
}

// TestContainerKeptThroughLockDelay: a container whose last child's
// holder expired with a lock-delay stays (the delay lives on it) until
// end_lock_delay, which deletes it then.
func TestContainerKeptThroughLockDelay(t *testing.T) {
	h := newDemo(t)
	base := h.s.NumNodes()
	a := h.open()
	h.ok(recipeLock(a, "/demo/q/lock", ex, 2000))
	h.ok(expireCmd(a, h.s.Epoch()))
	since := h.idx
	if !exists(h.s, "/demo/q/lock") || !exists(h.s, "/demo/q") {
		t.Fatal("a container in lock-delay was deleted")
	}
	if _, ok := h.s.LockDelayOf("/demo/q/lock"); !ok {
		t.Fatal("the delay is gone")
	}
	h.ok(Command{Op: OpEndLockDelay, Path: "/demo/q/lock", Since: since})
	if exists(h.s, "/demo/q/lock") || exists(h.s, "/demo/q") || h.s.NumNodes() != base {
		t.Fatalf("after the delay: %d nodes, want %d", h.s.NumNodes(), base)
	}
	if _, ok := h.s.LockDelayOf("/demo/q/lock"); ok {
		t.Fatal("a delay is kept for the deleted container")
	}
}

// TestContainerRecreateNeverReusesSeq: a container deleted and made
// again never names a lock node as before, and its tokens rise.
func TestContainerRecreateNeverReusesSeq(t *testing.T) {
	h := newDemo(t)
	seen := map[string]bool{}
	var lastTok uint64
	for round := range 4 {
		a := h.open()
		for range round + 1 { // more nodes each round: counters differ
			r := h.ok(recipeLock(a, "/demo/r", ex, 0))
			if seen[r.Node.Path] || r.Token <= lastTok {
				t.Fatalf("round %d: %s again (token %x after %x)", round, r.Node.Path, r.Token, lastTok)
			}
			seen[r.Node.Path], lastTok = true, r.Token
		}
		h.ok(closeCmd(a))
		if exists(h.s, "/demo/r") {
			t.Fatalf("round %d: container outlived its children", round)
		}
	}
	// A container at another path starts above them too (one counter per cell).
	r := h.ok(recipeLock(h.open(), "/demo/other", ex, 0))
	if seen[api.Join("/demo/r", api.Base(r.Node.Path))] || seqOf(t, r.Node.Path) < 10 {
		t.Fatalf("another container starts at %s", r.Node.Path)
	}
}

// TestContainerSnapshotAndMove: the container flag and the cell's
// counter survive a snapshot, and a staged move keeps the flag (the
// copy's digest covers it); a container the seal emptied goes on the
// new cell when the delay its held lock moved as ends.
func TestContainerSnapshotAndMove(t *testing.T) {
	from := newDemo(t)
	a := from.open()
	from.ok(recipeLock(a, "/demo/m/lock", sh, 0))
	g := from.open()
	from.ok(recipeLock(g, "/demo/gone", ex, 0))
	from.ok(closeCmd(g)) // /demo/gone goes, the counter rises
	s2 := restore(t, from.snap())
	if n, _ := s2.Get("/demo/m/lock"); !n.Container || s2.containerSeq != from.s.containerSeq || s2.containerSeq == 0 {
		t.Fatalf("restored: %+v, counter %d want %d", n, s2.containerSeq, from.s.containerSeq)
	}
	from.ok(closeCmd(a)) // emptied: gone before the move
	from.ok(recipeLock(from.open(), "/demo/m/lock", sh, 0))
	seal := from.ok(sealCmd("/demo", "other", 3)) // the seal deletes the lock node, not the container
	nodes := exportAll(t, from.s, "/demo")
	to := newHarness(t)
	to.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1})
	for _, n := range nodes {
		if n.Path == "/demo/m/lock" && !n.Container {
			t.Fatalf("export %+v lost the container flag", n)
		}
	}
	to.ok(stagePage("/demo", 2, 9, 0, false, nodes...))
	if n, _ := to.s.Get("/demo/m/lock"); !n.Container {
		t.Fatalf("staged %+v is no container", n)
	}
	moveTo(t, to, seal, nodes, 2, 10, 777)
	// The lock held at the seal moved as a lock-delay: the container
	// stays for it, and goes at its end.
	d, ok := to.s.LockDelayOf("/demo/m/lock")
	if !ok || !exists(to.s, "/demo/m/lock") {
		t.Fatalf("moved container in delay: %v %v", ok, exists(to.s, "/demo/m/lock"))
	}
	to.ok(Command{Op: OpEndLockDelay, Path: "/demo/m/lock", Since: d.Since})
	if exists(to.s, "/demo/m/lock") || exists(to.s, "/demo/m") {
		t.Fatal("an empty container stayed after its delay")
	}
}

// TestContainerQuota: containers count against the tenant's node quota
// as nodes do, and are released with their last child.
func TestContainerQuota(t *testing.T) {
	h := newDemo(t)
	q := &api.Quota{Nodes: 4, Sessions: 1}
	a := h.ok(Command{Op: OpOpenSession, Tenant: "t1", Quota: q}).Session
	for round := range 5 {
		c := recipeLock(a, "/demo/t/e/lock", ex, 0)
		c.Tenant, c.Quota = "t1", q
		r := h.ok(c)
		if u := h.s.tenants["t1"]; u == nil || u.nodes != 4 {
			t.Fatalf("round %d: usage %+v, want 4 nodes (3 directories and the lock)", round, u)
		}
		h.ok(Command{Op: OpDelete, Path: r.Node.Path, WriteHeader: api.WriteHeader{Session: a}, Tenant: "t1"})
		if u := h.s.tenants["t1"]; u == nil || u.nodes != 0 {
			t.Fatalf("round %d: usage %+v after the release, want no nodes", round, u)
		}
	}
}
