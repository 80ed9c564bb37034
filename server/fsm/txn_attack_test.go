package fsm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// Hostile review of transactions (issue 26 item 2): attacks on the state
// machine's side of a txn entry.

// containerCmd creates path with its missing ancestors as containers (as
// a lock recipe does).
func containerCmd(path string) Command {
	return Command{Op: OpCreate, Path: path, MakeParents: true, Container: true}
}

func tseq(p string) TxnOp {
	o := tcreate(p)
	o.Sequential = true
	return o
}

// TestAttackTxnContainerEmptied: a delete of a container's last child
// followed, in the same transaction, by a write under that container.
// Both are checked against the state before the transaction, where the
// container exists; a delete that dropped the container at once would
// leave the later write without its parent after the delete applied:
// half a transaction. Each case must apply whole (the container is
// dropped only if the transaction leaves it empty) or change nothing.
// The mutant TxnContainerNow (drop at once) fails it.
func TestAttackTxnContainerEmptied(t *testing.T) {
	cases := []struct {
		name    string
		setup   []string // container creates
		ops     []TxnOp
		present []string // after the txn
		gone    []string
	}{
		{name: "delete last child, create sibling", setup: []string{"/demo/c/x"},
			ops: []TxnOp{tdelete("/demo/c/x"), tcreate("/demo/c/y")}, present: []string{"/demo/c", "/demo/c/y"}, gone: []string{"/demo/c/x"}},
		{name: "delete last child, put creates sibling", setup: []string{"/demo/c/x"},
			ops: []TxnOp{tdelete("/demo/c/x"), tput("/demo/c/y", "v")}, present: []string{"/demo/c/y"}, gone: []string{"/demo/c/x"}},
		{name: "cascade two levels, create under the upper", setup: []string{"/demo/b/c/x"},
			ops: []TxnOp{tdelete("/demo/b/c/x"), tcreate("/demo/b/z")}, present: []string{"/demo/b", "/demo/b/z"}, gone: []string{"/demo/b/c"}},
		{name: "delete last child, sequential create", setup: []string{"/demo/c/x"},
			ops: []TxnOp{tdelete("/demo/c/x"), tseq("/demo/c/q-")}, present: []string{"/demo/c", "/demo/c/q-0000000000"}},
		{name: "delete alone still cleans up", setup: []string{"/demo/c/x"},
			ops: []TxnOp{tdelete("/demo/c/x")}, gone: []string{"/demo/c", "/demo/c/x"}},
		{name: "two deletes empty it", setup: []string{"/demo/c/x", "/demo/c/w"},
			ops: []TxnOp{tdelete("/demo/c/x"), tdelete("/demo/c/w")}, gone: []string{"/demo/c"}},
		{name: "two containers, two cascades", setup: []string{"/demo/b/c/x", "/demo/b/d/y"},
			ops: []TxnOp{tdelete("/demo/b/c/x"), tdelete("/demo/b/d/y")}, gone: []string{"/demo/b", "/demo/b/c", "/demo/b/d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newDemo(t)
			for _, p := range tc.setup {
				h.ok(containerCmd(p))
			}
			r := h.apply(txnCmd(nil, tc.ops...))
			if r.Err != nil {
				t.Fatalf("refused %v (failed then %d): a txn whose writes each check out must apply whole", r.Err, r.FailedThen)
			}
			for _, p := range tc.present {
				if _, ok := h.s.Get(p); !ok {
					t.Errorf("%s missing after the txn (nodes %v)", p, nodePaths(h.s))
				}
			}
			for _, p := range tc.gone {
				if _, ok := h.s.Get(p); ok {
					t.Errorf("%s still there after the txn (nodes %v)", p, nodePaths(h.s))
				}
			}
			deleted := map[string]bool{}
			for _, ch := range h.changes {
				if ch.Type == ChangeDeleted {
					deleted[ch.Path] = true
				}
			}
			for _, p := range tc.gone {
				if !deleted[p] {
					t.Errorf("no deletion reported for %s (changes %v): its watchers would not hear", p, h.changes)
				}
			}
		})
	}
}

// TestAttackTxnAclFlags: the per-write ACL flags hold inside a txn as
// they do alone: a lock-role write (OwnOnly) deletes only its own
// session's ephemeral nodes, no make_parents above the grant, and a
// refusal changes nothing (snapshot bytes).
func TestAttackTxnAclFlags(t *testing.T) {
	h := newDemo(t)
	a, b := h.open(), h.open()
	h.ok(ephCmd(b, "/demo/bs"))
	h.ok(ephCmd(a, "/demo/as"))
	h.ok(createCmd("/demo/plain"))
	h.ok(createCmd("/demo/g"))
	own := func(sess uint64, ops ...TxnOp) func() Command {
		return func() Command {
			for i := range ops {
				ops[i].OwnOnly = true
			}
			c := txnCmd(nil, ops...)
			c.Admin, c.Session, c.Tenant = false, sess, "acme"
			return c
		}
	}
	from := func(o TxnOp, root string) TxnOp { o.MakeParents, o.ParentsFrom = true, root; return o }
	for _, st := range []txnStep{
		{name: "own-only delete of another session's ephemeral", cmd: own(a, tdelete("/demo/as"), tdelete("/demo/bs")), code: api.CodeForbidden, failOps: 2},
		{name: "own-only delete of a persistent node", cmd: own(a, tdelete("/demo/plain")), code: api.CodeForbidden, failOps: 1},
		{name: "own-only put creating", cmd: own(a, tput("/demo/new", "x")), code: api.CodeForbidden, failOps: 1},
		{name: "non-admin delete of another's ephemeral", cmd: func() Command {
			c := txnCmd(nil, tdelete("/demo/bs"))
			c.Admin, c.Session = false, a
			return c
		}, code: api.CodeForbidden, failOps: 1},
		{name: "make_parents above the grant (create)", cmd: func() Command {
			return txnCmd(nil, tput("/demo/g/ok", "1"), from(tcreate("/demo/h/i/j"), "/demo/h/i"))
		}, code: api.CodeForbidden, failOps: 2},
		{name: "make_parents above the grant (put)", cmd: func() Command {
			return txnCmd(nil, from(tput("/demo/h/i/j", "v"), "/demo/h/i"))
		}, code: api.CodeForbidden, failOps: 1},
		{name: "make_parents within the grant", cmd: func() Command {
			return txnCmd(nil, from(tcreate("/demo/g/i/j"), "/demo/g"))
		}, changed: []string{"/demo/g/i", "/demo/g/i/j"}},
		{name: "own-only delete of its own ephemeral", cmd: own(a, tdelete("/demo/as")), changed: []string{"/demo/as"}},
	} {
		runTxnStep(t, h, st)
	}
}

// TestAttackTxnBounds: the entry's bounds and the writes' interplay:
// a delete of a lock directory in lock-delay, a delete of a parent with
// a create under it, a node written twice, sequential names past a
// plain node's, summed byte quotas. Each refusal changes nothing.
func TestAttackTxnBounds(t *testing.T) {
	h := newDemo(t)
	a := h.open()
	h.ok(createCmd("/demo/L"))
	lk := lockCmd(a, "/demo/L", api.LockExclusive)
	lk.LockDelayMS = 5000
	h.ok(lk)
	h.ok(expireCmd(a, h.s.Epoch()))
	if _, in := h.s.LockDelayOf("/demo/L"); !in {
		t.Fatal("setup: /demo/L is not in lock-delay")
	}
	h.ok(createCmd("/demo/p"))
	h.ok(createCmd("/demo/s"))
	h.ok(createCmd("/demo/s/q-0000000001")) // a plain node on the next sequential name
	long := "/demo/" + strings.Repeat("x", api.MaxPathLen)
	q := &api.Quota{Sessions: 10, Nodes: 100, Bytes: 1500, Watches: 10, WritesPerSec: 100}
	tenant := func(ops ...TxnOp) func() Command {
		return func() Command {
			c := txnCmd(nil, ops...)
			c.Admin, c.Tenant, c.Quota = false, "acme", q
			return c
		}
	}
	v := strings.Repeat("v", 700)
	for _, st := range []txnStep{
		{name: "lock dir in lock-delay", cmd: func() Command { return txnCmd(nil, tput("/demo/a", "1"), tdelete("/demo/L")) },
			code: api.CodeConflict, failOps: 2},
		{name: "delete parent, create under it", cmd: func() Command { return txnCmd(nil, tdelete("/demo/p"), tcreate("/demo/p/c")) },
			code: api.CodeBadRequest, failOps: 2},
		{name: "create then delete one node", cmd: func() Command { return txnCmd(nil, tcreate("/demo/n"), tdelete("/demo/n")) },
			code: api.CodeBadRequest, failOps: 2},
		{name: "sequential name over a later put", cmd: func() Command { return txnCmd(nil, tseq("/demo/s/q-"), tput("/demo/s/q-0000000002", "x")) },
			code: api.CodeBadRequest, failOps: 2},
		{name: "path too long", cmd: func() Command { return txnCmd(nil, tput(long, "x")) }, code: api.CodeInvalidPath},
		{name: "condition path too long", cmd: func() Command {
			return txnCmd([]api.TxnCond{{If: api.CondExists, Path: long}}, tput("/demo/a", "x"))
		}, code: api.CodeInvalidPath},
		{name: "bytes quota summed", cmd: tenant(tput("/demo/b1", v), tput("/demo/b2", v), tput("/demo/b3", v)),
			code: api.CodeQuotaExceeded, failOps: 3},
		{name: "sequential skips the plain node", cmd: func() Command { return txnCmd(nil, tseq("/demo/s/q-"), tseq("/demo/s/q-")) },
			changed: []string{"/demo/s/q-0000000000", "/demo/s/q-0000000002"}},
	} {
		runTxnStep(t, h, st)
	}
}

// TestAttackTxnDeterminism: a log of transactions (guarded, sequential,
// ephemeral, container cascades, refusals) replayed on a fresh state, and
// on a state restored from a snapshot taken halfway, gives byte-identical
// snapshots.
func TestAttackTxnDeterminism(t *testing.T) {
	h := newDemo(t)
	var log [][]byte
	rec := func(c Command) {
		log = append(log, c.Encode())
		h.apply(c)
	}
	a := h.open() // the setup both states apply alike
	h2 := newDemo(t)
	s2 := h2.open()
	if s2 != a {
		t.Fatalf("setup: sessions %d and %d", a, s2)
	}
	rec(containerCmd("/demo/c/x"))
	rec(createCmd("/demo/L"))
	lk := lockCmd(a, "/demo/L", api.LockExclusive)
	log = append(log, lk.Encode())
	tok := h.ok(lk).Token
	guarded := txnCmd([]api.TxnCond{holds("/demo/L", tok)}, tput("/demo/v", "1"), tseq("/demo/q-"), tseq("/demo/q-"))
	guarded.Session = a
	rec(guarded)
	e := tcreate("/demo/e")
	e.Ephemeral = true
	eph := txnCmd(nil, e, tdelete("/demo/c/x"), tcreate("/demo/c/y"))
	eph.Session = a
	rec(eph)
	rec(txnCmd([]api.TxnCond{holds("/demo/L", tok+1)}, tput("/demo/v", "2")))
	half := snapBytes(t, h.s)
	mid := len(log)
	rec(txnCmd(nil, tdelete("/demo/c/y"), tput("/demo/v", "3")))
	rec(expireCmd(a, h.s.Epoch()))
	for _, b := range log {
		h2.applyBytes(b)
	}
	h3 := harnessOn(t, restore(t, half))
	for _, b := range log[mid:] {
		h3.applyBytes(b)
	}
	want := snapBytes(t, h.s)
	if !bytes.Equal(want, snapBytes(t, h2.s)) {
		t.Fatal("replaying the txn log gave another snapshot")
	}
	if !bytes.Equal(want, snapBytes(t, h3.s)) {
		t.Fatal("replaying the txn log after a restore gave another snapshot")
	}
}

// TestAttackTxnSealedPrefix: a txn naming a sealed prefix (a prefix
// being moved), by a write or only by a condition, is refused with the
// routing code (moved) naming no condition or write, changes nothing,
// and is not kept for dedupe: the same request applies once the prefix
// is served again.
func TestAttackTxnSealedPrefix(t *testing.T) {
	h := newDemo(t)
	h.ok(ensureCmd("/other", 1))
	s := h.open()
	h.ok(sealCmd("/other", "cell2", 3))
	byCond := txnCmd([]api.TxnCond{{If: api.CondMissing, Path: "/other/x"}}, tput("/demo/a", "1"))
	runTxnStep(t, h, txnStep{name: "condition on a sealed prefix", cmd: func() Command { return byCond }, code: api.CodeMoved})
	h.ok(sealCmd("/demo", "cell2", 4))
	c := txnCmd(nil, tput("/demo/a", "1"))
	c.Session, c.Request = s, 1
	runTxnStep(t, h, txnStep{name: "write on a sealed prefix", cmd: func() Command { return c }, code: api.CodeMoved})
	h.ok(Command{Op: OpUnsealPrefix, Path: "/demo", DirIndex: 5})
	if r := h.ok(c); len(r.TxnNodes) != 1 {
		t.Fatalf("the retry once served: %+v", r)
	}
}

// TestAttackTxnForeignToken: a holds condition is satisfied only by a
// token holding that very directory: not another directory's holder's
// token, not the same create index under another directory epoch (a
// token from before a prefix move, or another cell's), not 0.
func TestAttackTxnForeignToken(t *testing.T) {
	h := newDemo(t)
	a, b := h.open(), h.open()
	h.ok(createCmd("/demo/L1"))
	h.ok(createCmd("/demo/L2"))
	t1 := h.ok(lockCmd(a, "/demo/L1", api.LockExclusive)).Token
	t2 := h.ok(lockCmd(b, "/demo/L2", api.LockExclusive)).Token
	for _, st := range []txnStep{
		{name: "another directory's token", cmd: func() Command { return txnCmd([]api.TxnCond{holds("/demo/L2", t1)}, tput("/demo/v", "x")) },
			code: api.CodeConditionFailed, failIf: 1},
		{name: "another epoch's token", cmd: func() Command {
			return txnCmd([]api.TxnCond{holds("/demo/L1", api.MakeToken(api.TokenEpoch(t1)+1, api.TokenIndex(t1)))}, tput("/demo/v", "x"))
		}, code: api.CodeConditionFailed, failIf: 1},
		{name: "token 0", cmd: func() Command { return txnCmd([]api.TxnCond{holds("/demo/L1", 0)}, tput("/demo/v", "x")) },
			code: api.CodeConditionFailed, failIf: 1},
		{name: "holds on the lock node, not its directory", cmd: func() Command {
			return txnCmd([]api.TxnCond{holds("/demo/L1/lock-0000000000", t1)}, tput("/demo/v", "x"))
		}, code: api.CodeConditionFailed, failIf: 1},
		{name: "both holders", cmd: func() Command {
			return txnCmd([]api.TxnCond{holds("/demo/L1", t1), holds("/demo/L2", t2)}, tput("/demo/v", "x"))
		}, changed: []string{"/demo/v"}},
	} {
		runTxnStep(t, h, st)
	}
}
