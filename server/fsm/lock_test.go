package fsm

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

const (
	ex = api.LockExclusive
	sh = api.LockShared
)

// TestLockQueue: nodes are created in order (each on its own session), then
// some are deleted; want[i] is the queue position node i waits for, -1 if it
// holds, and is checked against both the create reply (before deletes) and
// LockState (after).
func TestLockQueue(t *testing.T) {
	tests := []struct {
		name      string
		modes     []api.LockMode
		atCreate  []int // wait-for at create time
		deletes   []int
		afterward []int // wait-for after the deletes (-2: deleted)
	}{
		{"single exclusive holds", []api.LockMode{ex}, []int{-1}, nil, []int{-1}},
		{"exclusive waits for exclusive", []api.LockMode{ex, ex, ex}, []int{-1, 0, 1}, nil, []int{-1, 0, 1}},
		{"exclusive waits for nearest shared", []api.LockMode{sh, ex}, []int{-1, 0}, nil, []int{-1, 0}},
		{"many shared hold together", []api.LockMode{sh, sh, sh, sh}, []int{-1, -1, -1, -1}, nil, []int{-1, -1, -1, -1}},
		{"shared waits for nearest lower exclusive", []api.LockMode{ex, sh, sh}, []int{-1, 0, 0}, nil, []int{-1, 0, 0}},
		{"writer behind readers waits for the last reader", []api.LockMode{sh, sh, sh, ex}, []int{-1, -1, -1, 2},
			[]int{2}, []int{-1, -1, -2, 1}},
		{"writer holds after the last reader leaves", []api.LockMode{sh, sh, ex}, []int{-1, -1, 1},
			[]int{1, 0}, []int{-2, -2, -1}},
		{"readers behind a waiting writer wait for it", []api.LockMode{sh, ex, sh, sh}, []int{-1, 0, 1, 1},
			nil, []int{-1, 0, 1, 1}},
		{"readers behind the writer hold once it goes", []api.LockMode{sh, ex, sh, sh}, []int{-1, 0, 1, 1},
			[]int{0, 1}, []int{-2, -2, -1, -1}},
		{"writer behind a writer behind readers", []api.LockMode{sh, ex, sh, ex}, []int{-1, 0, 1, 2},
			nil, []int{-1, 0, 1, 2}},
		{"deleting a middle waiter repoints its successor", []api.LockMode{ex, ex, ex}, []int{-1, 0, 1},
			[]int{1}, []int{-1, -2, 0}},
		{"deleting a middle writer frees readers to the holder", []api.LockMode{ex, ex, sh, sh}, []int{-1, 0, 1, 1},
			[]int{1}, []int{-1, -2, 0, 0}},
		{"deleting the holder: next holds, others unchanged", []api.LockMode{ex, sh, sh, ex}, []int{-1, 0, 0, 2},
			[]int{0}, []int{-2, -1, -1, 2}},
		{"deleting a middle reader", []api.LockMode{sh, sh, sh, ex}, []int{-1, -1, -1, 2},
			[]int{1}, []int{-1, -2, -1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newDemo(t)
			h.ok(createCmd("/demo/l"))
			paths := make([]string, len(tt.modes))
			for i, m := range tt.modes {
				r := h.ok(lockCmd(h.open(), "/demo/l", m))
				paths[i] = r.Node.Path
				if r.Node.Lock != m || !r.Node.Ephemeral {
					t.Fatalf("node %+v", r.Node)
				}
				want := ""
				if tt.atCreate[i] >= 0 {
					want = paths[tt.atCreate[i]]
				}
				if r.WaitFor != want {
					t.Fatalf("create #%d (%s): wait_for %q, want %q", i, m, r.WaitFor, want)
				}
				if r.Token != api.MakeToken(1, h.idx) {
					t.Fatalf("create #%d: token %x, want %x", i, r.Token, api.MakeToken(1, h.idx))
				}
			}
			for _, d := range tt.deletes {
				h.ok(delCmd(paths[d], nil))
			}
			for i, w := range tt.afterward {
				exists, held, wf, _ := h.s.LockState(paths[i])
				switch {
				case w == -2:
					if exists {
						t.Errorf("#%d: deleted node exists", i)
					}
				case w == -1:
					if !exists || !held || wf != "" {
						t.Errorf("#%d: exists=%v held=%v wait_for=%q, want held", i, exists, held, wf)
					}
				default:
					if !exists || held || wf != paths[w] {
						t.Errorf("#%d: exists=%v held=%v wait_for=%q, want waiting for %s", i, exists, held, wf, paths[w])
					}
				}
			}
			// Restored state agrees.
			rs := restore(t, h.snap())
			for _, p := range paths {
				e1, h1, w1, t1 := h.s.LockState(p)
				e2, h2, w2, t2 := rs.LockState(p)
				if e1 != e2 || h1 != h2 || w1 != w2 || t1 != t2 {
					t.Errorf("restored LockState(%s) differs", p)
				}
			}
		})
	}
}

// Lock siblings share the parent's counter with plain sequential children;
// non-lock children never affect the queue.
func TestLockIgnoresNonLockSiblings(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	s := h.open()
	a := h.ok(lockCmd(s, "/demo/l", ex)).Node.Path
	h.ok(seqCmd("/demo/l/plain-"))
	h.ok(ephCmd(s, "/demo/l/eph"))
	r := h.ok(lockCmd(s, "/demo/l", ex))
	if r.WaitFor != a {
		t.Fatalf("wait_for %q, want %q", r.WaitFor, a)
	}
	h.ok(delCmd(a, nil))
	if _, held, _, _ := h.s.LockState(r.Node.Path); !held {
		t.Fatal("not held after the only lower lock node left")
	}
	// LockState of a non-lock node or a missing one: does not exist.
	for _, p := range []string{"/demo/l/eph", "/demo/l/plain-0000000001", "/demo/l/none", "/demo/l"} {
		if exists, held, wf, tok := h.s.LockState(p); exists || held || wf != "" || tok != 0 {
			t.Errorf("LockState(%s) = %v %v %q %d", p, exists, held, wf, tok)
		}
	}
}

// Tokens of successive holders of one lock strictly increase, across session
// expiry, leader changes and snapshot restores.
func TestLockTokensIncrease(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	var last uint64
	for i := range 20 {
		sess := h.open()
		r := h.ok(lockCmd(sess, "/demo/l", ex))
		if r.WaitFor != "" {
			t.Fatalf("round %d: waits for %s", i, r.WaitFor)
		}
		if want := api.MakeToken(1, r.Node.CreateIndex); r.Token != want || r.Node.CreateIndex != h.idx {
			t.Fatalf("token %x, want MakeToken(1, %d)=%x", r.Token, r.Node.CreateIndex, want)
		}
		if r.Token <= last {
			t.Fatalf("round %d: token %x after %x", i, r.Token, last)
		}
		last = r.Token
		switch i % 4 {
		case 0:
			h.ok(delCmd(r.Node.Path, nil))
		case 1:
			h.ok(closeCmd(sess))
		case 2:
			h.ok(expireCmd(sess, h.s.Epoch()))
			h.leaderStart()
		case 3:
			h.ok(delCmd(r.Node.Path, nil))
			h = harnessOn(t, restore(t, h.snap()))
		}
	}
}

// A queued waiter's token is fixed at create: when it comes to hold, its
// token exceeds the previous holder's.
func TestLockTokenOfWaiter(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	a := h.ok(lockCmd(h.open(), "/demo/l", ex))
	b := h.ok(lockCmd(h.open(), "/demo/l", ex))
	h.ok(delCmd(a.Node.Path, nil))
	_, held, _, tok := h.s.LockState(b.Node.Path)
	if !held || tok != b.Token || tok <= a.Token {
		t.Fatalf("held=%v token %x (create said %x, previous holder %x)", held, tok, b.Token, a.Token)
	}
}

// OpEnsurePrefix with a higher directory epoch raises the high bits of
// tokens granted afterwards; a lower one never lowers them; an existing
// holder keeps the token it was granted.
func TestLockTokenDirectoryEpoch(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/l"))
	sess := h.open()
	a := h.ok(lockCmd(sess, "/demo/l", ex))
	if api.TokenEpoch(a.Token) != 1 || api.TokenIndex(a.Token) != a.Node.CreateIndex {
		t.Fatalf("token %x", a.Token)
	}
	r := h.ok(ensureCmd("/demo", 5))
	if r.Epoch != 5 || len(h.changes) != 0 {
		t.Fatalf("raise: epoch %d, changes %v", r.Epoch, h.changes)
	}
	if r.Node == nil || r.Node.Path != "/demo" {
		t.Fatalf("ensure result node %+v", r.Node)
	}
	if _, _, _, tok := h.s.LockState(a.Node.Path); tok != a.Token {
		t.Fatalf("holder's token changed by the raise: %x, granted %x", tok, a.Token)
	}
	b := h.ok(lockCmd(sess, "/demo/l", ex))
	if api.TokenEpoch(b.Token) != 5 || b.Token <= a.Token {
		t.Fatalf("new token %x", b.Token)
	}
	for _, lower := range []uint64{4, 1, 0} {
		if r := h.ok(ensureCmd("/demo", lower)); r.Epoch != 5 {
			t.Fatalf("ensure epoch %d lowered the epoch to %d", lower, r.Epoch)
		}
	}
	c := h.ok(lockCmd(sess, "/demo/l", ex))
	if api.TokenEpoch(c.Token) != 5 || c.Token <= b.Token {
		t.Fatalf("token after lower ensures %x", c.Token)
	}
	// Survives a snapshot; and a token of the raised epoch beats any of the
	// old epoch, whatever the index.
	rs := harnessOn(t, restore(t, h.snap()))
	d := rs.ok(lockCmd(sess, "/demo/l", ex))
	if api.TokenEpoch(d.Token) != 5 || d.Token <= c.Token || d.Token <= api.MakeToken(1, 1<<api.TokenIndexBits-1) {
		t.Fatalf("token after restore %x", d.Token)
	}
	// Each prefix has its own epoch; a new prefix with epoch 0 gets 1.
	r = h.ok(ensureCmd("/other", 0))
	if r.Epoch != 1 {
		t.Fatalf("new prefix epoch %d", r.Epoch)
	}
	h.ok(createCmd("/other/l"))
	if tok := h.ok(lockCmd(sess, "/other/l", ex)).Token; api.TokenEpoch(tok) != 1 {
		t.Fatalf("other prefix token %x", tok)
	}
}
