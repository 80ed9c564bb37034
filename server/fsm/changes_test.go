package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// ringDesc is the changes as "index kind path" lines.
func ringDesc(cs []api.Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%d %s %s\n", c.Index, c.Kind, c.Node.Path)
	}
	return b.String()
}

// since is every change under /demo from index from on.
func since(h *harness, from uint64) []api.Change {
	return h.s.ReadChanges("/demo", from, api.MaxChangeRing).Changes
}

// TestChangeRingRecordsEveryChange: every kind of node change lands in
// the ring at its entry's index, with the node (a delete's as it was):
// creates with the parents they make, puts, deletes, the containers a
// delete drops, a session's ephemerals at its close and at its expiry,
// a transaction's writes; refusals and reads record nothing.
func TestChangeRingRecordsEveryChange(t *testing.T) {
	type step struct {
		name string
		run  func(h *harness)
		want string // "%d" is the entry's index
	}
	var sess, other uint64
	steps := []step{
		{"create makes parents", func(h *harness) {
			h.ok(Command{Op: OpCreate, Path: "/demo/a/b", Value: []byte("1"), MakeParents: true})
		}, "%[1]d put /demo/a\n%[1]d put /demo/a/b\n"},
		{"put", func(h *harness) { h.ok(putCmd("/demo/a/b", "2", nil)) }, "%d put /demo/a/b\n"},
		{"refused put", func(h *harness) { h.fail(putCmd("/demo/a/b", "3", u64(9)), api.CodeVersionMismatch) }, ""},
		{"delete", func(h *harness) { h.ok(delCmd("/demo/a/b", nil)) }, "%d delete /demo/a/b\n"},
		{"open sessions", func(h *harness) { sess, other = h.open(), h.open() }, ""},
		{"ephemeral in containers", func(h *harness) { h.ok(recipeLock(sess, "/demo/r/lock", ex, 0)) },
			"%[1]d put /demo/r\n%[1]d put /demo/r/lock\n%[1]d put /demo/r/lock/lock-0000000000\n"},
		{"close deletes ephemerals and containers", func(h *harness) { h.ok(closeCmd(sess)) },
			"%[1]d delete /demo/r/lock/lock-0000000000\n%[1]d delete /demo/r/lock\n%[1]d delete /demo/r\n"},
		{"ephemeral", func(h *harness) { h.ok(ephCmd(other, "/demo/e")) }, "%d put /demo/e\n"},
		{"expiry deletes ephemerals", func(h *harness) { h.ok(expireCmd(other, h.s.Epoch())) }, "%d delete /demo/e\n"},
		{"txn", func(h *harness) { h.ok(txnCmd(nil, tput("/demo/t1", "x"), tcreate("/demo/t2"), tdelete("/demo/a"))) },
			"%[1]d put /demo/t1\n%[1]d put /demo/t2\n%[1]d delete /demo/a\n"},
		{"a read", func(h *harness) { h.s.Get("/demo/t1") }, ""},
	}
	h := newDemo(t)
	for _, st := range steps {
		before := h.idx
		st.run(h)
		want := ""
		if st.want != "" {
			want = fmt.Sprintf(st.want, h.idx)
		}
		if got := ringDesc(since(h, before+1)); got != want {
			t.Fatalf("%s: ring got\n%swant\n%s", st.name, got, want)
		}
	}
	// Values: a put's as written, a delete's as it was.
	cs := since(h, 1)
	if c := cs[3]; c.Kind != api.ChangePut || string(c.Node.Value) != "2" || c.Node.Version != 2 {
		t.Fatalf("put recorded as %+v", c)
	}
	if c := cs[4]; c.Kind != api.ChangeDelete || string(c.Node.Value) != "2" || c.Node.Path != "/demo/a/b" {
		t.Fatalf("delete recorded as %+v", c)
	}
	if c := cs[0]; c.Node.Path != "/demo" || c.Index != 2 {
		t.Fatalf("the prefix root's create recorded as %+v", c)
	}
	if c := cs[5]; !c.Node.Container {
		t.Fatalf("a recipe's directory recorded as %+v, not a container", c.Node)
	}
	// Root filters: only /demo/r's own changes, the root included.
	if got := h.s.ReadChanges("/demo/r", 1, 100).Changes; len(got) != 6 {
		t.Fatalf("changes under /demo/r: %s", ringDesc(got))
	}
	// Limit and More: a page of 2 holds the first 2 changes and the rest
	// of the second one's index (a page keeps an index whole).
	all := since(h, 1)
	n := 2
	for n < len(all) && all[n].Index == all[n-1].Index {
		n++
	}
	if p := h.s.ReadChanges("/demo", 1, 2); ringDesc(p.Changes) != ringDesc(all[:n]) || !p.More || p.Floor != 1 {
		t.Fatalf("limit 2: more %v, floor %d, changes\n%swant\n%s", p.More, p.Floor, ringDesc(p.Changes), ringDesc(all[:n]))
	}
}

// TestChangeRingFloor (mutant lockd_broken_changes_floor): past its
// bounds the ring drops whole indexes, oldest first, and its Floor rises
// past them, so every change at an index >= Floor is still there; a
// state read from a snapshot starts empty with Floor = its index + 1.
func TestChangeRingFloor(t *testing.T) {
	t.Run("count bound", func(t *testing.T) {
		h := newDemo(t)
		for i := 0; i < api.MaxChangeRing/2+10; i++ {
			// Two changes per entry.
			h.ok(txnCmd(nil, tput("/demo/p", fmt.Sprint(i)), tput("/demo/q", fmt.Sprint(i))))
		}
		checkFloor(t, h)
	})
	t.Run("byte bound", func(t *testing.T) {
		h := newDemo(t)
		big := strings.Repeat("v", api.MaxValueSize)
		for i := 0; i < api.MaxChangeRingBytes/api.MaxValueSize+3; i++ {
			h.ok(putCmd("/demo/big", big, nil))
		}
		checkFloor(t, h)
		if h.s.ring.bytes > api.MaxChangeRingBytes {
			t.Fatalf("ring holds %d bytes, bound %d", h.s.ring.bytes, api.MaxChangeRingBytes)
		}
	})
	t.Run("snapshot recover", func(t *testing.T) {
		h := newDemo(t)
		h.ok(putCmd("/demo/k", "1", nil))
		r := restore(t, h.snap())
		p := r.ReadChanges("/demo", 1, 100)
		if p.Floor != h.idx+1 || len(p.Changes) != 0 {
			t.Fatalf("recovered at %d: floor %d, %d changes; want floor %d, none", h.idx, p.Floor, len(p.Changes), h.idx+1)
		}
		h2 := harnessOn(t, r)
		h2.ok(putCmd("/demo/k", "2", nil))
		if got := ringDesc(h2.s.ReadChanges("/demo", 1, 100).Changes); got != fmt.Sprintf("%d put /demo/k\n", h2.idx) {
			t.Fatalf("after recover: %s", got)
		}
	})
}

// checkFloor: the ring is within its bounds, its oldest change is at
// Floor, and every index from Floor to the last is there whole.
func checkFloor(t *testing.T, h *harness) {
	t.Helper()
	p := h.s.ReadChanges("/demo", 1, api.MaxChangeRing)
	if n := h.s.ring.len(); n > api.MaxChangeRing || n == 0 {
		t.Fatalf("ring holds %d changes, bound %d", n, api.MaxChangeRing)
	}
	if p.Floor <= 1 || p.Changes[0].Index != p.Floor {
		t.Fatalf("after overflow: floor %d, oldest change at %d", p.Floor, p.Changes[0].Index)
	}
	perIndex := map[uint64]int{}
	for _, c := range p.Changes {
		perIndex[c.Index]++
	}
	for i := p.Floor; i <= h.idx; i++ {
		if n := perIndex[i]; n != perIndex[h.idx] {
			t.Fatalf("index %d has %d changes in the ring, the last has %d: an index cut in part", i, n, perIndex[h.idx])
		}
	}
}

// TestChangeRingMoves: a prefix's copy staged here records nothing; once
// served, its floor is the index after the serving entry; the old
// cell's seal and drop leave the prefix unreadable there (moved).
func TestChangeRingMoves(t *testing.T) {
	from := newDemo(t)
	from.ok(putCmd("/demo/k", "1", nil))
	seal := from.ok(sealCmd("/demo", "other", 3))
	to := newHarness(t)
	to.ok(Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1})
	to.ok(ensureCmd("/other", 1))
	to.ok(putCmd("/other/x", "1", nil))
	served := moveTo(t, to, seal, exportAll(t, from.s, "/demo"), 2, 5, 0)
	p := to.s.ReadChanges("/demo", 1, 100)
	if p.Floor != served+1 || len(p.Changes) != 0 {
		t.Fatalf("moved in at %d: floor %d, changes %s", served, p.Floor, ringDesc(p.Changes))
	}
	if p := to.s.ReadChanges("/other", 1, 100); p.Floor != 1 || len(p.Changes) != 2 {
		t.Fatalf("another prefix's changes: floor %d, %s", p.Floor, ringDesc(p.Changes))
	}
	to.ok(putCmd("/demo/k", "2", nil))
	if got := ringDesc(to.s.ReadChanges("/demo", 1, 100).Changes); got != fmt.Sprintf("%d put /demo/k\n", to.idx) {
		t.Fatalf("after the move: %s", got)
	}
	before := from.s.ring.len()
	from.ok(Command{Op: OpDropPrefix, Path: "/demo"})
	if from.s.ring.len() != before {
		t.Fatal("the drop of a moved prefix recorded changes")
	}
}

// TestChangeRingDeterminism: replicas applying one log hold equal rings,
// and the ring never feeds back into apply: a state whose ring was
// emptied answers every entry byte for byte as one whose ring was not,
// and writes the same snapshot.
func TestChangeRingDeterminism(t *testing.T) {
	g := generate(testSeed(t), genLen)
	a, b, c := newHarness(t), newHarness(t), newHarness(t)
	for i, e := range g.entries {
		a.applyBytes(e)
		b.applyBytes(e)
		c.s.ring = newChangeRing(c.idx + 1) // forgets everything, every entry
		c.applyBytes(e)
		if !bytes.Equal(a.raw, c.raw) || !reflect.DeepEqual(a.changes, c.changes) {
			t.Fatalf("entry %d: the ring changed an answer", i)
		}
	}
	if !reflect.DeepEqual(a.s.ring, b.s.ring) {
		t.Fatal("two replicas of one log hold different rings")
	}
	if !bytes.Equal(a.snap(), c.snap()) {
		t.Fatal("the ring reached the snapshot")
	}
	if a.s.ring.len() == 0 {
		t.Fatal("the generated log recorded no change: the test is vacuous")
	}
}

// TestChangesPageKeepsAnIndexWhole: a page of the ring never ends inside
// an index: a session's end deleting many ephemerals at one index comes
// whole, past the limit, and the next page starts at the next index.
func TestChangesPageKeepsAnIndexWhole(t *testing.T) {
	h := newDemo(t)
	h.ok(Command{Op: OpCreate, Path: "/demo/before", MakeParents: true})
	sess := h.open()
	const keys = 7
	for i := range keys {
		h.ok(ephCmd(sess, fmt.Sprintf("/demo/e%d", i)))
	}
	from := h.idx + 1
	h.ok(closeCmd(sess))
	ended := h.idx
	h.ok(Command{Op: OpCreate, Path: "/demo/after", MakeParents: true})
	for _, limit := range []int{1, 3, keys, keys + 1} {
		p := h.s.ReadChanges("/demo", from, limit)
		if len(p.Changes) < keys {
			t.Fatalf("limit %d: a page of %d changes cut the session's end at index %d:\n%s", limit, len(p.Changes), ended, ringDesc(p.Changes))
		}
		for _, c := range p.Changes[:keys] {
			if c.Index != ended || c.Kind != api.ChangeDelete {
				t.Fatalf("limit %d: %d %s %s, want deletes at %d", limit, c.Index, c.Kind, c.Node.Path, ended)
			}
		}
		if wantMore := limit < keys+1; p.More != wantMore {
			t.Fatalf("limit %d: More %v, want %v", limit, p.More, wantMore)
		}
	}
}
