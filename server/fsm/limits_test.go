package fsm

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

func openCmd(nonce string) Command { return Command{Op: OpOpenSession, Nonce: nonce} }

// lockIn is a lock create that makes its lock directory.
func lockIn(sess uint64, dir string, mode api.LockMode) Command {
	c := lockCmd(sess, dir, mode)
	c.MakeParents = true
	return c
}

// A retried session open (same nonce) returns the session the first attempt
// opened, changes nothing, and survives a snapshot. Without a nonce every
// open is a new session.
func TestOpenSessionDedupedByNonce(t *testing.T) {
	h := newDemo(t)
	first := h.ok(openCmd("n-1"))
	h.ok(createCmd("/demo/x")) // something in between
	before := snapNoIndex(t, h.s)
	again := h.ok(openCmd("n-1"))
	if again.Session != first.Session || again.LeaseMS != first.LeaseMS {
		t.Fatalf("retried open answered session %d lease %d, want session %d lease %d", again.Session, again.LeaseMS, first.Session, first.LeaseMS)
	}
	if !bytes.Equal(before, snapNoIndex(t, h.s)) {
		t.Fatal("retried open changed the state")
	}
	if other := h.ok(openCmd("n-2")); other.Session == first.Session {
		t.Fatal("a different nonce got the same session")
	}
	a, b := h.ok(openCmd("")), h.ok(openCmd(""))
	if a.Session == b.Session {
		t.Fatal("opens without a nonce were deduplicated")
	}

	// The window is part of the state: a restored replica answers alike.
	r := harnessOn(t, restore(t, h.snap()))
	if got := r.ok(openCmd("n-1")).Session; got != first.Session {
		t.Fatalf("after restore, retried open answered session %d, want %d", got, first.Session)
	}
	if !bytes.Equal(snapBytes(t, restore(t, h.snap())), h.snap()) {
		t.Fatal("snapshot with open nonces does not round-trip byte for byte")
	}

	// Once the session has ended, a retry opens a new one (the first had
	// nothing yet; answering a dead session would only fail later).
	h.ok(closeCmd(first.Session))
	if got := h.ok(openCmd("n-1")).Session; got == first.Session || got != h.idx {
		t.Fatalf("retry after the session ended answered %d, want a new session %d", got, h.idx)
	}
}

func TestOpenNonceWindowIsBounded(t *testing.T) {
	h := newDemo(t)
	first := h.ok(openCmd("old")).Session
	var oldest uint64
	for i := 0; i < api.MaxOpenNonces; i++ {
		id := h.ok(openCmd("n-" + strconv.Itoa(i))).Session
		if i == 0 {
			oldest = id
		}
	}
	// The window holds exactly the last MaxOpenNonces opens.
	if got := h.ok(openCmd("n-0")).Session; got != oldest {
		t.Fatalf("the oldest nonce still in the window answered %d, want %d", got, oldest)
	}
	if got := h.ok(openCmd("old")).Session; got == first {
		t.Fatal("a nonce pushed out of the window still deduplicated")
	}
}

func TestOpenNonceTooLong(t *testing.T) {
	h := newDemo(t)
	before := snapNoIndex(t, h.s)
	h.fail(openCmd(strings.Repeat("n", api.MaxNonceLen+1)), api.CodeBadRequest)
	if !bytes.Equal(before, snapNoIndex(t, h.s)) {
		t.Fatal("refused open changed the state")
	}
	h.ok(openCmd(strings.Repeat("n", api.MaxNonceLen)))
}

// Fencing tokens are epoch<<40 | createIndex. A lock node created past
// index 2^40-1 would wrap to a token below every earlier one; the cell must
// refuse it (token_exhausted) and leave the state untouched. Plain nodes
// carry no token and are still created.
func TestLockCreateRefusedPastTokenIndex(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	h.idx = api.MaxTokenIndex - 1 // forge: the log has grown this far
	last := h.ok(lockIn(sess, "/demo/a", api.LockExclusive))
	if h.idx != api.MaxTokenIndex || api.TokenIndex(last.Token) != api.MaxTokenIndex {
		t.Fatalf("lock at index %d: token %#x", h.idx, last.Token)
	}
	before := snapNoIndex(t, h.s)
	r := h.fail(lockIn(sess, "/demo/b", api.LockExclusive), api.CodeTokenExhausted)
	if r.Token != 0 {
		t.Fatalf("refused create carried token %#x", r.Token)
	}
	if !bytes.Equal(before, snapNoIndex(t, h.s)) {
		t.Fatal("refused lock create changed the state")
	}
	h.ok(createCmd("/demo/plain"))
	h.ok(ephCmd(sess, "/demo/eph"))
}

// The directory epoch fills the top 24 bits; from 2^23 on, int64(token)
// (how SQL stores it) would be negative. ensure_prefix refuses such an
// epoch, for a new prefix and as a raise of an existing one.
func TestEnsurePrefixRefusesEpochPastTokenSpace(t *testing.T) {
	h := newDemo(t)
	h.fail(ensureCmd("/big", api.MaxTokenEpoch+1), api.CodeTokenExhausted)
	if _, ok := h.s.nodes["/big"]; ok {
		t.Fatal("refused ensure_prefix created the prefix")
	}
	h.fail(ensureCmd("/demo", 1<<23), api.CodeTokenExhausted)
	h.fail(ensureCmd("/demo", math.MaxUint64), api.CodeTokenExhausted)
	if got := h.s.nodes["/demo"].dirEpoch; got != 1 {
		t.Fatalf("refused raise moved /demo's epoch to %d", got)
	}

	h.ok(ensureCmd("/demo", api.MaxTokenEpoch))
	sess := h.open()
	h.idx = api.MaxTokenIndex - 1
	r := h.ok(lockIn(sess, "/demo/l", api.LockExclusive))
	if int64(r.Token) <= 0 || api.TokenEpoch(r.Token) != api.MaxTokenEpoch {
		t.Fatalf("largest token %#x: as int64 %d", r.Token, int64(r.Token))
	}
}

// A state restored from before the limits existed may hold a prefix epoch
// over the limit: a lock create under it is refused rather than minting a
// token that is negative as int64.
func TestLockCreateRefusedUnderOversizeEpoch(t *testing.T) {
	h := newDemo(t)
	h.s.nodes["/demo"].dirEpoch = api.MaxTokenEpoch + 1 // forged old state
	sess := h.open()
	h.fail(lockIn(sess, "/demo/l", api.LockExclusive), api.CodeTokenExhausted)
}

// checkCreate is the pure half of create: whatever it answers, the state
// is unchanged (applyCreate does every mutation).
func TestCheckCreateChangesNothing(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	h.ok(createCmd("/demo/p"))
	h.ok(ephCmd(sess, "/demo/e"))
	cmds := []Command{
		createCmd("/demo/q"),
		createCmd("/demo/p"),
		createCmd("/demo/a/b/c"),
		{Op: OpCreate, Path: "/demo/a/b/c", MakeParents: true},
		seqCmd("/demo/p/s-"),
		ephCmd(sess, "/demo/e2"),
		ephCmd(sess+100, "/demo/e3"),
		createCmd("/demo/e/child"),
		lockIn(sess, "/demo/l", api.LockExclusive),
		lockCmd(sess, "/demo/missing", api.LockShared),
		{Op: OpCreate, Path: "/demo/l/x-", Lock: api.LockExclusive},
	}
	for _, c := range cmds {
		before := snapBytes(t, h.s)
		_, _ = h.s.checkCreate(h.idx+1, &c)
		if !bytes.Equal(before, snapBytes(t, h.s)) {
			t.Fatalf("checkCreate(%+v) changed the state", c)
		}
	}
}

// TestNamedCellLimits: each per-cell limit (shrunk here) refuses the entry
// that would pass it with limit_exceeded, and nothing of it is applied: no
// session, no node, no missing parent, no sequence number, no byte.
func TestNamedCellLimits(t *testing.T) {
	t.Run("sessions", func(t *testing.T) {
		h := newDemo(t)
		h.s.limits.sessions = 2
		a := h.open()
		h.open()
		h.fail(openCmd("third"), api.CodeLimitExceeded)
		if h.s.NumSessions() != 2 {
			t.Fatalf("%d sessions after a refused open", h.s.NumSessions())
		}
		h.ok(Command{Op: OpCloseSession, WriteHeader: api.WriteHeader{Session: a}})
		h.open() // room again
	})
	t.Run("nodes, with make_parents", func(t *testing.T) {
		h := newDemo(t)
		h.s.limits.nodes = h.s.NumNodes() + 2
		before := snapNoIndex(t, h.s)
		h.fail(Command{Op: OpCreate, Path: "/demo/a/b/c", MakeParents: true}, api.CodeLimitExceeded)
		if !bytes.Equal(before, snapNoIndex(t, h.s)) {
			t.Fatal("a refused create left parents behind")
		}
		h.ok(Command{Op: OpCreate, Path: "/demo/a/b", MakeParents: true})
		h.fail(createCmd("/demo/a/c"), api.CodeLimitExceeded)
	})
	t.Run("children, sequential", func(t *testing.T) {
		h := newDemo(t)
		h.s.limits.children = 2
		h.ok(createCmd("/demo/q"))
		h.ok(seqCmd("/demo/q/n-"))
		h.ok(seqCmd("/demo/q/n-"))
		h.fail(seqCmd("/demo/q/n-"), api.CodeLimitExceeded)
		h.ok(Command{Op: OpDelete, Path: "/demo/q/n-0000000000"})
		if r := h.ok(seqCmd("/demo/q/n-")); r.Node.Path != "/demo/q/n-0000000002" {
			t.Fatalf("the refused create took a sequence number: next is %s", r.Node.Path)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		h := newDemo(t)
		h.s.limits.bytes = h.s.bytes + 100
		h.ok(Command{Op: OpPut, Path: "/demo/v", Value: make([]byte, 50)})
		h.fail(Command{Op: OpPut, Path: "/demo/v", Value: make([]byte, 120)}, api.CodeLimitExceeded)
		h.fail(Command{Op: OpPut, Path: "/demo/w", Value: make([]byte, 60)}, api.CodeLimitExceeded)
		h.ok(Command{Op: OpPut, Path: "/demo/v", Value: make([]byte, 10)}) // shrinking always fits
		h.ok(Command{Op: OpPut, Path: "/demo/w", Value: make([]byte, 60)})
		// The count is derived: a restored state rebuilds it.
		if r := restore(t, h.snap()); r.bytes != h.s.bytes {
			t.Fatalf("restored byte count %d, want %d", r.bytes, h.s.bytes)
		}
	})
}

// TestOpenNonceIsPerTenant: a nonce names an open within its tenant.
// Another tenant replaying it opens a session of its own and never learns
// the first one's id or secret; the first tenant's retry still gets its
// session. Fails on mutant lockd_broken_noncekey.
func TestOpenNonceIsPerTenant(t *testing.T) {
	h := newDemo(t)
	open := func(tenant, secret string) Result {
		return h.ok(Command{Op: OpOpenSession, Nonce: "n-1", Tenant: tenant, WriteHeader: api.WriteHeader{Secret: secret}})
	}
	alice := open("alice", "alice-secret")
	for _, tc := range []struct {
		name, tenant, secret string
		same                 bool
	}{
		{"another tenant replays it", "mallory", "mallory-secret", false},
		{"no tenant replays it", "", "anon-secret", false},
		{"the tenant retries", "alice", "retry-secret", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := open(tc.tenant, tc.secret)
			if (got.Session == alice.Session) != tc.same {
				t.Fatalf("session %d, alice's %d: same=%v, want %v", got.Session, alice.Session, got.Session == alice.Session, tc.same)
			}
			if !tc.same && got.Secret == alice.Secret {
				t.Fatalf("%s learned alice's secret", tc.tenant)
			}
		})
	}
	if !bytes.Equal(snapBytes(t, restore(t, h.snap())), h.snap()) {
		t.Fatal("snapshot with tenants' nonces does not round-trip byte for byte")
	}
}
