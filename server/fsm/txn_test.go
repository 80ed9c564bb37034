package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// txnCmd is a txn entry of conds and writes (an admin's, no session).
func txnCmd(conds []api.TxnCond, ops ...TxnOp) Command {
	return Command{Op: OpTxn, If: conds, Then: ops, Admin: true}
}

func tput(p, v string) TxnOp {
	return TxnOp{TxnOp: api.TxnOp{Op: api.TxnPut, Path: p, Value: []byte(v)}}
}
func tcreate(p string) TxnOp { return TxnOp{TxnOp: api.TxnOp{Op: api.TxnCreate, Path: p}} }
func tdelete(p string) TxnOp { return TxnOp{TxnOp: api.TxnOp{Op: api.TxnDelete, Path: p}} }

func holds(dir string, token uint64) api.TxnCond {
	return api.TxnCond{If: api.CondHolds, Path: dir, Token: token}
}

// txnStep is one entry of TestTxnTranscript: the command, the refusal
// it gets (code, and the condition or write it names, from 1), or, if
// it applies, the paths its changes must report.
type txnStep struct {
	name            string
	cmd             func() Command
	code            api.Code
	failIf, failOps int
	changed         []string // applied: every path its changes must name
}

// TestTxnTranscript drives transactions through the state machine: each
// condition kind holding and failing, all or nothing (a refusal leaves the
// snapshot byte-identical and reports no change), the bounds, the ACL
// flags the entry carries, quotas and limits summed over the writes,
// sequential and ephemeral creates, and the changes reported for watches
// and caches. The mutant TxnHolds (the token condition always passes)
// fails it.
func TestTxnTranscript(t *testing.T) {
	h := newDemo(t)
	a, b := h.open(), h.open()
	h.ok(createCmd("/demo/L"))
	t1 := h.ok(lockCmd(a, "/demo/L", api.LockExclusive)).Token
	h.ok(putCmd("/demo/v", "0", nil))
	h.ok(Command{Op: OpCreate, Path: "/demo/eph", Ephemeral: true, WriteHeader: api.WriteHeader{Session: b}})
	h.ok(grantCmd(b, "/demo/v", 1)) // b caches /demo/v: a txn's put must drop it
	big := strings.Repeat("x", api.MaxTxnValueBytes/2+1)
	many := func(n int) []TxnOp {
		ops := make([]TxnOp, n)
		for i := range ops {
			ops[i] = tput(fmt.Sprintf("/demo/m%d", i), "")
		}
		return ops
	}
	steps := []txnStep{
		{name: "holder writes", cmd: func() Command { return txnCmd([]api.TxnCond{holds("/demo/L", t1)}, tput("/demo/v", "1")) },
			changed: []string{"/demo/v"}},
		{name: "another token", cmd: func() Command { return txnCmd([]api.TxnCond{holds("/demo/L", t1+1)}, tput("/demo/v", "2")) },
			code: api.CodeConditionFailed, failIf: 1},
		{name: "no such lock", cmd: func() Command { return txnCmd([]api.TxnCond{holds("/demo/none", t1)}, tput("/demo/v", "2")) },
			code: api.CodeConditionFailed, failIf: 1},
		{name: "version holds", cmd: func() Command {
			return txnCmd([]api.TxnCond{{If: api.CondVersion, Path: "/demo/v", Version: 2}}, tput("/demo/v", "2"))
		}, changed: []string{"/demo/v"}},
		{name: "version stale", cmd: func() Command {
			return txnCmd([]api.TxnCond{holds("/demo/L", t1), {If: api.CondVersion, Path: "/demo/v", Version: 2}}, tput("/demo/v", "3"))
		}, code: api.CodeConditionFailed, failIf: 2},
		{name: "missing holds", cmd: func() Command {
			return txnCmd([]api.TxnCond{{If: api.CondMissing, Path: "/demo/n"}}, tcreate("/demo/n"), tput("/demo/w", "w"))
		}, changed: []string{"/demo/n", "/demo/w", "/demo"}},
		{name: "missing fails", cmd: func() Command {
			return txnCmd([]api.TxnCond{{If: api.CondMissing, Path: "/demo/n"}}, tcreate("/demo/n2"))
		},
			code: api.CodeConditionFailed, failIf: 1},
		{name: "exists fails", cmd: func() Command {
			return txnCmd([]api.TxnCond{{If: api.CondExists, Path: "/demo/x"}}, tcreate("/demo/n2"))
		},
			code: api.CodeConditionFailed, failIf: 1},
		{name: "all or nothing", cmd: func() Command { return txnCmd(nil, tput("/demo/a", "x"), tcreate("/demo/v")) },
			code: api.CodeNodeExists, failOps: 2},
		{name: "delete then failing put", cmd: func() Command {
			p := tput("/demo/w", "y")
			p.Version = u64(9)
			return txnCmd(nil, tdelete("/demo/n"), p)
		}, code: api.CodeVersionMismatch, failOps: 2},
		{name: "one node twice", cmd: func() Command { return txnCmd(nil, tput("/demo/a", "x"), tput("/demo/a/b", "y")) },
			code: api.CodeBadRequest, failOps: 2},
		{name: "no writes", cmd: func() Command { return txnCmd(nil) }, code: api.CodeBadRequest},
		{name: "too many writes", cmd: func() Command { return txnCmd(nil, many(api.MaxTxnOps+1)...) }, code: api.CodeBadRequest},
		{name: "too many conditions", cmd: func() Command {
			conds := make([]api.TxnCond, api.MaxTxnConds+1)
			for i := range conds {
				conds[i] = api.TxnCond{If: api.CondExists, Path: "/demo/v"}
			}
			return txnCmd(conds, tput("/demo/v", "z"))
		}, code: api.CodeBadRequest},
		{name: "values too large", cmd: func() Command { return txnCmd(nil, tput("/demo/b1", big), tput("/demo/b2", big)) },
			code: api.CodeValueTooLarge},
		{name: "unknown condition", cmd: func() Command { return txnCmd([]api.TxnCond{{If: "maybe", Path: "/demo/v"}}, tput("/demo/v", "z")) },
			code: api.CodeBadRequest},
		{name: "another cell's path", cmd: func() Command {
			return txnCmd([]api.TxnCond{{If: api.CondExists, Path: "/other/v"}}, tput("/demo/v", "z"))
		},
			code: api.CodeWrongCell},
		{name: "own only", cmd: func() Command {
			o := tput("/demo/v", "z")
			o.OwnOnly = true
			c := txnCmd(nil, tput("/demo/c", "c"), o)
			c.Admin = false
			return c
		}, code: api.CodeForbidden, failOps: 2},
		{name: "another session's ephemeral", cmd: func() Command {
			c := txnCmd(nil, tput("/demo/eph", "z"))
			c.Admin, c.Session = false, a
			return c
		}, code: api.CodeForbidden, failOps: 1},
		{name: "parents outside the grant", cmd: func() Command {
			o := tcreate("/demo/g/h/i")
			o.MakeParents, o.ParentsFrom = true, "/demo/g/h"
			return txnCmd(nil, o)
		}, code: api.CodeForbidden, failOps: 1},
		{name: "ephemeral needs a session", cmd: func() Command {
			o := tcreate("/demo/e1")
			o.Ephemeral = true
			return txnCmd(nil, o)
		}, code: api.CodeNoSession, failOps: 1},
		{name: "ephemeral and sequential", cmd: func() Command {
			e, s1, s2 := tcreate("/demo/e1"), tcreate("/demo/q-"), tcreate("/demo/q-")
			e.Ephemeral = true
			s1.Sequential, s2.Sequential = true, true
			c := txnCmd([]api.TxnCond{holds("/demo/L", t1)}, e, s1, s2)
			c.Session = a
			return c
		}, changed: []string{"/demo/e1", "/demo/q-0000000000", "/demo/q-0000000001"}},
	}
	for _, st := range steps {
		runTxnStep(t, h, st)
	}
	if got := h.ok(seqCmd("/demo/q-")).Node.Path; got != "/demo/q-0000000002" {
		t.Fatalf("a sequential create after the txn's two got %s", got)
	}
	if n, ok := h.s.Get("/demo/e1"); !ok || n.Owner != a {
		t.Fatalf("the txn's ephemeral node: %+v %v, want owned by %d", n, ok, a)
	}
	if h.s.CacheRecorded(b, "/demo/v", 1) {
		t.Fatal("a txn's put left /demo/v in its cacher's record")
	}
	// The holder's session expires and another takes the lock: the old
	// token's guarded write is refused, the new one's applies.
	h.ok(expireCmd(a, h.s.Epoch()))
	t2 := h.ok(lockCmd(b, "/demo/L", api.LockExclusive)).Token
	runTxnStep(t, h, txnStep{name: "superseded token", cmd: func() Command { return txnCmd([]api.TxnCond{holds("/demo/L", t1)}, tput("/demo/v", "old")) },
		code: api.CodeConditionFailed, failIf: 1})
	runTxnStep(t, h, txnStep{name: "new holder", cmd: func() Command { return txnCmd([]api.TxnCond{holds("/demo/L", t2)}, tput("/demo/v", "new")) },
		changed: []string{"/demo/v"}})
}

// runTxnStep applies st and checks its outcome; a refusal must leave the
// state as it was (snapshot bytes, but the applied index) and report no
// change.
func runTxnStep(t *testing.T, h *harness, st txnStep) {
	t.Helper()
	before := snapNoIndex(t, h.s)
	r := h.apply(st.cmd())
	if got := errCode(r); got != st.code {
		t.Fatalf("%s: code %q (%v), want %q", st.name, got, r.Err, st.code)
	}
	if st.code != "" {
		if r.FailedIf != st.failIf || r.FailedThen != st.failOps {
			t.Fatalf("%s: failed if %d then %d, want %d and %d", st.name, r.FailedIf, r.FailedThen, st.failIf, st.failOps)
		}
		if len(h.changes) != 0 || !bytes.Equal(before, snapNoIndex(t, h.s)) {
			t.Fatalf("%s: a refused txn changed the state (changes %v)", st.name, h.changes)
		}
		return
	}
	if len(r.TxnNodes) != len(st.cmd().Then) {
		t.Fatalf("%s: %d nodes for %d writes", st.name, len(r.TxnNodes), len(st.cmd().Then))
	}
	reported := map[string]bool{}
	for _, ch := range h.changes {
		reported[ch.Path] = true
	}
	for _, p := range st.changed {
		if !reported[p] {
			t.Fatalf("%s: changes %v do not name %s", st.name, h.changes, p)
		}
	}
}

// Quotas and limits are summed over a transaction's writes: each write
// alone fits, together they do not, and nothing applies.
func TestTxnSumsLimits(t *testing.T) {
	h := newDemo(t)
	q := &api.Quota{Sessions: 10, Nodes: 2, Bytes: 1 << 20, Watches: 10, WritesPerSec: 100}
	quota := txnCmd(nil, tput("/demo/t1", "a"), tput("/demo/t2", "b"), tput("/demo/t3", "c"))
	quota.Admin, quota.Tenant, quota.Quota = false, "acme", q
	runTxnStep(t, h, txnStep{name: "tenant quota", cmd: func() Command { return quota }, code: api.CodeQuotaExceeded, failOps: 3})
	h.s.limits.children = 2
	h.ok(createCmd("/demo/d"))
	h.ok(createCmd("/demo/d/c1"))
	kids := txnCmd(nil, tcreate("/demo/d/c2"), tcreate("/demo/d/c3"))
	runTxnStep(t, h, txnStep{name: "children", cmd: func() Command { return kids }, code: api.CodeLimitExceeded, failOps: 2})
	h.s.limits.children = defaultLimits.children
	h.s.limits.nodes = len(h.s.nodes) + 1
	nodes := txnCmd(nil, tcreate("/demo/n1"), tcreate("/demo/n2"))
	runTxnStep(t, h, txnStep{name: "cell nodes", cmd: func() Command { return nodes }, code: api.CodeLimitExceeded, failOps: 2})
	// A delete first frees the room the create after it takes.
	freed := txnCmd(nil, tdelete("/demo/d/c1"), tcreate("/demo/n1"), tcreate("/demo/n2"))
	runTxnStep(t, h, txnStep{name: "delete frees", cmd: func() Command { return freed }, changed: []string{"/demo/d/c1", "/demo/n1", "/demo/n2"}})
}

// A retried txn (same session and request id) is answered from the
// session's window: the first result, applied once.
func TestTxnDedupe(t *testing.T) {
	h := newDemo(t)
	s := h.open()
	c := txnCmd(nil, tcreate("/demo/once"))
	c.Session, c.Request = s, 1
	first := h.ok(c)
	again := h.apply(c)
	if again.Err != nil || again.Index != first.Index || len(again.TxnNodes) != 1 || again.TxnNodes[0].Path != "/demo/once" || len(h.changes) != 0 {
		t.Fatalf("retry answered %+v (changes %v), want the first %+v", again, h.changes, first)
	}
	// A refused txn's answer is kept too: the retry is refused alike.
	r := txnCmd([]api.TxnCond{{If: api.CondMissing, Path: "/demo/once"}}, tcreate("/demo/twice"))
	r.Session, r.Request = s, 2
	f1 := h.fail(r, api.CodeConditionFailed)
	f2 := h.apply(r)
	if f1.FailedIf != 1 || f2.FailedIf != 1 || f2.Index != f1.Index || errCode(f2) != api.CodeConditionFailed {
		t.Fatalf("refusal %+v, retry %+v", f1, f2)
	}
}

// BenchmarkTxnApply: the apply of a guarded txn of three puts (a holds
// condition) against three single puts, on a state with a held lock.
func BenchmarkTxnApply(b *testing.B) {
	for _, mode := range []string{"txn", "single"} {
		b.Run(mode, func(b *testing.B) {
			h := newDemo(b)
			s := h.open()
			h.ok(createCmd("/demo/L"))
			tok := h.ok(lockCmd(s, "/demo/L", api.LockExclusive)).Token
			tc := txnCmd([]api.TxnCond{holds("/demo/L", tok)}, tput("/demo/a", "1"), tput("/demo/b", "2"), tput("/demo/c", "3"))
			txn := tc.Encode()
			var singles [][]byte
			for _, p := range []string{"/demo/a", "/demo/b", "/demo/c"} {
				c := putCmd(p, "1", nil)
				singles = append(singles, c.Encode())
			}
			idx := h.idx
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if mode == "txn" {
					idx++
					h.s.Apply(idx, txn)
					continue
				}
				for _, e := range singles {
					idx++
					h.s.Apply(idx, e)
				}
			}
		})
	}
}

// TestTxnResultEpoch: a transaction's result says its prefix's directory
// epoch when it was decided, applied or refused by a condition or a
// write (the etcd gateway's revisions: TxnResponse.Epoch), and the
// prefix's new epoch after the prefix is ensured at a higher one; a
// routing refusal (a prefix not served here) says none.
func TestTxnResultEpoch(t *testing.T) {
	h := newDemo(t) // /demo at epoch 1
	missing := api.TxnCond{If: api.CondMissing, Path: "/demo/e"}
	for _, tc := range []struct {
		name  string
		cmd   Command
		epoch uint64
	}{
		{"applied", txnCmd(nil, tput("/demo/e", "1")), 1},
		{"a condition failed", txnCmd([]api.TxnCond{missing}, tput("/demo/f", "1")), 1},
		{"a write failed", txnCmd(nil, tcreate("/demo/e")), 1},
		{"not served here", txnCmd(nil, tput("/nowhere/e", "1")), 0},
	} {
		if res := h.apply(tc.cmd); res.Epoch != tc.epoch {
			t.Errorf("%s: epoch %d (%+v), want %d", tc.name, res.Epoch, res, tc.epoch)
		}
	}
	h.ok(ensureCmd("/demo", 4))
	if res := h.ok(txnCmd(nil, tput("/demo/e", "2"))); res.Epoch != 4 {
		t.Fatalf("after the prefix's epoch rose to 4: %d", res.Epoch)
	}
}
