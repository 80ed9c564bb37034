package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/lockservice/lockd/api"
)

func sealCmd(p, to string, dirIndex uint64) Command {
	return Command{Op: OpSealPrefix, Path: p, Cell: to, DirIndex: dirIndex}
}

// stageCmd is a stage page of driver generation 1: page 0 if first,
// else page 1.
func stageCmd(p string, epoch uint64, first, last bool, nodes ...api.ExportedNode) Command {
	page := uint64(1)
	if first {
		page = 0
	}
	return stagePage(p, epoch, 1, page, last, nodes...)
}

func stagePage(p string, epoch, gen, page uint64, last bool, nodes ...api.ExportedNode) Command {
	return Command{Op: OpStagePrefix, Path: p, Epoch: epoch, First: page == 0, Last: last, Nodes: nodes, DirIndex: gen, Page: page}
}

// TestSealRefusesEverythingUnderThePrefix: after the seal no write, read
// or lock under the prefix is served (moved, naming the new cell), the
// ephemeral nodes are gone at the seal's index (their holders lose the
// lock there), and persistent nodes stay, frozen, for the export.
func TestSealRefusesEverythingUnderThePrefix(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	h.ok(putCmd("/demo/cfg", "v1", nil))
	h.ok(createCmd("/demo/locks"))
	held := h.ok(lockCmd(sess, "/demo/locks", api.LockExclusive)).Node.Path
	waiter := h.open()
	h.ok(lockCmd(waiter, "/demo/locks", api.LockExclusive))

	h.ok(sealCmd("/demo", "cell3", 7))
	deleted := map[string]bool{}
	moved := false
	for _, c := range h.changes {
		if c.Type == ChangeDeleted {
			deleted[c.Path] = true
		}
		moved = moved || c.Type == ChangeMoved && c.Path == "/demo"
	}
	if !deleted[held] || len(deleted) != 2 || !moved {
		t.Fatalf("seal changes %v: want both lock nodes deleted and the prefix moved", h.changes)
	}
	for _, c := range []Command{
		putCmd("/demo/cfg", "v2", nil),
		createCmd("/demo/new"),
		lockCmd(sess, "/demo/locks", api.LockExclusive),
		delCmd("/demo/cfg", nil),
	} {
		r := h.fail(c, api.CodeMoved)
		if r.Err.Cell != "cell3" {
			t.Errorf("%s: moved names %q, want cell3", c.Op, r.Err.Cell)
		}
	}
	if err := h.s.CheckServes("/demo/cfg"); err == nil || err.Code != api.CodeMoved {
		t.Errorf("reads under a sealed prefix: %v", err)
	}
	// Sealing again for the same cell changes nothing; for another, refused.
	h.ok(sealCmd("/demo", "cell3", 7))
	h.fail(sealCmd("/demo", "cell4", 7), api.CodeConflict)
	// A stale view may not revive it: ensure_prefix is refused, and an
	// unseal older than the migration that sealed it too.
	h.fail(ensureCmd("/demo", 5), api.CodeMoved)
	h.fail(Command{Op: OpUnsealPrefix, Path: "/demo", DirIndex: 6}, api.CodeConflict)
	nodes, more, err := h.s.ExportPrefix("/demo", "", 100)
	if err != nil || more || len(nodes) != 3 {
		t.Fatalf("export %v more=%v err=%v: want /demo, /demo/cfg, /demo/locks", nodes, more, err)
	}
	h.ok(Command{Op: OpUnsealPrefix, Path: "/demo", DirIndex: 9})
	h.ok(putCmd("/demo/cfg", "v2", nil))
}

// TestMoveCopiesPersistentNodes moves a prefix between two states in pages
// and checks values, versions and sequence counters arrive, that the copy
// is not served until ensure_prefix, and that tokens issued after the move
// compare above every token issued before.
func TestMoveCopiesPersistentNodes(t *testing.T) {
	from := newDemo(t)
	sess := from.open()
	from.ok(createCmd("/demo/locks"))
	var before uint64
	for i := 0; i < 5; i++ {
		r := from.ok(lockCmd(sess, "/demo/locks", api.LockExclusive))
		before = max(before, r.Token)
		from.ok(delCmd(r.Node.Path, nil))
	}
	for i := 0; i < 25; i++ {
		p := fmt.Sprintf("/demo/k%02d", i)
		from.ok(putCmd(p, "a", nil))
		from.ok(putCmd(p, fmt.Sprint(i), nil))
	}
	seal := from.ok(sealCmd("/demo", "other", 3))
	want := snapNodes(t, from.s, "/demo")

	to := newHarness(t)
	to.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1})
	after, page := "", uint64(0)
	var last Result
	for {
		nodes, more, err := from.s.ExportPrefix("/demo", after, 7)
		if err != nil {
			t.Fatal(err)
		}
		last = to.ok(stagePage("/demo", 2, 5, page, !more, nodes...))
		if page == 1 { // a page sent twice changes nothing
			to.ok(stagePage("/demo", 2, 5, page, !more, nodes...))
			to.fail(stagePage("/demo", 2, 5, page+2, !more, nodes...), api.CodeConflict)            // past the next
			to.fail(stagePage("/demo", 2, 4, page+1, !more, nodes...), api.CodeMigrationInProgress) // an older driver's
		}
		page++
		if !more {
			break
		}
		after = nodes[len(nodes)-1].Path
	}
	if seal.Count == 0 || last.Count != seal.Count || last.Digest != seal.Digest {
		t.Fatalf("the copy's count and digest %d %s differ from the seal's %d %s", last.Count, last.Digest, seal.Count, seal.Digest)
	}
	if err := to.s.CheckServes("/demo/k01"); err == nil || err.Code != api.CodeUnavailable {
		t.Fatalf("a staged copy is served before the move commits: %v", err)
	}
	// A late first page of its driver cannot empty a complete copy, nor
	// can one of an older driver.
	to.ok(stagePage("/demo", 2, 5, 0, false))
	to.fail(stagePage("/demo", 2, 4, 0, false), api.CodeMigrationInProgress)
	to.fail(stagePage("/demo", 2, 5, page, true), api.CodeConflict) // past the last
	arrive := ensureCmd("/demo", 2)
	arrive.Staged = true
	to.fail(Command{Op: OpEnsurePrefix, Path: "/elsewhere", Epoch: 2, Staged: true}, api.CodeConflict) // moved here with no copy: never an empty prefix
	to.ok(arrive)
	to.ok(arrive) // a second copy changes nothing
	if got := snapNodes(t, to.s, "/demo"); got != want {
		t.Fatalf("copied nodes differ:\n got %s\nwant %s", got, want)
	}
	sess2 := to.open()
	r := to.ok(lockCmd(sess2, "/demo/locks", api.LockExclusive))
	if r.Token <= before || api.TokenEpoch(r.Token) != 2 {
		t.Fatalf("token after the move %d (epoch %d) is not above %d", r.Token, api.TokenEpoch(r.Token), before)
	}
	if r.Node.Path != "/demo/locks/lock-0000000005" {
		t.Errorf("sequence restarted: %s", r.Node.Path)
	}
	// The old copy goes; its root stays as the tombstone answering moved.
	from.ok(Command{Op: OpDropPrefix, Path: "/demo"})
	if len(from.changes) != 0 || from.s.NumNodes() != 1 {
		t.Fatalf("drop: %d nodes left, changes %v", from.s.NumNodes(), from.changes)
	}
	from.fail(putCmd("/demo/k01", "x", nil), api.CodeMoved)
}

// snapNodes is the prefix's nodes as (path, value, version, next seq),
// without indices (they are each cell's own).
func snapNodes(t *testing.T, s *State, prefix string) string {
	t.Helper()
	var b bytes.Buffer
	for _, p := range nodePaths(s) {
		if p != prefix && !bytes.HasPrefix([]byte(p), []byte(prefix+"/")) {
			continue
		}
		n := s.nodes[p]
		if n.ephemeral {
			continue
		}
		fmt.Fprintf(&b, "%s=%q@%d/%d ", n.path, n.value, n.version, n.nextSeq)
	}
	return b.String()
}

func TestStageRefusals(t *testing.T) {
	cases := []struct {
		name string
		cmd  Command
		code api.Code
	}{
		{"served here", stageCmd("/demo", 2, true, true), api.CodeConflict},
		{"not first, nothing staged", stageCmd("/other", 2, false, true), api.CodeConflict},
		{"outside the prefix", stageCmd("/other", 2, true, true, api.ExportedNode{Path: "/demo/x", Version: 1}), api.CodeBadRequest},
		{"out of order", stageCmd("/other", 2, true, true, api.ExportedNode{Path: "/other/b", Version: 1}, api.ExportedNode{Path: "/other/a", Version: 1}), api.CodeBadRequest},
		{"orphan", stageCmd("/other", 2, true, true, api.ExportedNode{Path: "/other/a/b", Version: 1}), api.CodeBadRequest},
		{"no epoch", stageCmd("/other", 0, true, true), api.CodeBadRequest},
		{"nested prefix", stageCmd("/other/x", 2, true, true), api.CodeInvalidPath},
		{"value too large", stageCmd("/other", 2, true, true, api.ExportedNode{Path: "/other/a", Value: make([]byte, api.MaxValueSize+1)}), api.CodeValueTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newDemo(t)
			before := snapNoIndex(t, h.s)
			h.fail(c.cmd, c.code)
			if !bytes.Equal(before, snapNoIndex(t, h.s)) {
				t.Fatal("a refused stage changed the state")
			}
		})
	}
}

// TestPrefixStatesSurviveSnapshots: sealed, staged and the seal's
// directory index come back from a snapshot.
func TestPrefixStatesSurviveSnapshots(t *testing.T) {
	h := newDemo(t)
	h.ok(putCmd("/demo/a", "1", nil))
	h.ok(sealCmd("/demo", "b", 4))
	h.ok(stageCmd("/moving", 3, true, false, api.ExportedNode{Path: "/moving/x", Value: []byte("v"), Version: 9}))
	s := restore(t, snapBytes(t, h.s))
	if got := s.PrefixState("/demo"); got != (PrefixInfo{State: PrefixSealed, Epoch: 1, MovedTo: "b", SealDirIndex: 4}) {
		t.Errorf("sealed prefix after restore: %+v", got)
	}
	if got := s.PrefixState("/moving"); got.State != PrefixStaging || got.Epoch != 3 {
		t.Errorf("staging prefix after restore: %+v", got)
	}
	if !bytes.Equal(snapBytes(t, s), snapBytes(t, h.s)) {
		t.Error("snapshot does not round-trip")
	}
}

// TestMoveKeepsOwners: a prefix's export carries each node's owner and
// the stage keeps it, so the tenant's usage (and so its quota) is the
// same on the new cell as on the old. Fails on mutant
// lockd_broken_exportowner.
func TestMoveKeepsOwners(t *testing.T) {
	from := newDemo(t)
	q := &api.Quota{Nodes: 10}
	for _, p := range []string{"/demo/t", "/demo/t/a", "/demo/t/b"} {
		from.ok(Command{Op: OpPut, Path: p, Value: []byte("v-" + p), Tenant: "team", Quota: q})
	}
	from.ok(sealCmd("/demo", "b", 4))
	nodes, more, err := from.s.ExportPrefix("/demo", "", 100)
	if err != nil || more {
		t.Fatalf("export: %v, more %v", err, more)
	}
	to := newDemo(t)
	to.ok(stageCmd("/moving", 3, true, true, renamed(nodes, "/demo", "/moving")...))
	_, wantNodes, wantBytes := from.s.Usage("team")
	_, gotNodes, gotBytes := to.s.Usage("team")
	if gotNodes != wantNodes || gotBytes-wantBytes != int64(3*(len("/moving")-len("/demo"))) {
		t.Fatalf("team's usage after the move: %d nodes, %d bytes; before: %d nodes, %d bytes", gotNodes, gotBytes, wantNodes, wantBytes)
	}
	if gotNodes != 3 {
		t.Fatalf("team owns %d nodes on the new cell, want 3", gotNodes)
	}
}

// renamed moves exported nodes from one prefix to another (two cells in
// one test share the demo prefix name otherwise).
func renamed(nodes []api.ExportedNode, from, to string) []api.ExportedNode {
	out := make([]api.ExportedNode, len(nodes))
	for i, n := range nodes {
		n.Path = to + n.Path[len(from):]
		out[i] = n
	}
	return out
}
