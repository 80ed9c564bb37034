package fsm

import (
	"bytes"
	"testing"

	"github.com/lockservice/lockd/api"
)

// openWith opens a session with a secret (and a tenant and quota).
func (h *harness) openWith(secret, tenant string, q *api.Quota) uint64 {
	h.tb.Helper()
	return h.ok(Command{Op: OpOpenSession, WriteHeader: api.WriteHeader{Secret: secret}, Tenant: tenant, Quota: q}).Session
}

// TestSessionSecret: every command naming a session needs its secret; a
// wrong one is refused before anything about the session changes, and
// does not enter its dedupe window.
func TestSessionSecret(t *testing.T) {
	h := newDemo(t)
	sess := h.openWith("right", "", nil)
	wrong := api.WriteHeader{Session: sess, Secret: "wrong", Request: 1}
	right := api.WriteHeader{Session: sess, Secret: "right", Request: 1}
	before := snapNoIndex(t, h.s)
	for _, c := range []Command{
		{Op: OpCreate, WriteHeader: wrong, Path: "/demo/e", Ephemeral: true},
		{Op: OpCreate, WriteHeader: api.WriteHeader{Session: sess, Secret: "wrong"}, Path: "/demo/p"},
		{Op: OpPut, WriteHeader: wrong, Path: "/demo/p", Value: []byte("x")},
		{Op: OpDelete, WriteHeader: wrong, Path: "/demo"},
		{Op: OpCloseSession, WriteHeader: api.WriteHeader{Session: sess}},
	} {
		h.fail(c, api.CodeUnauthorized)
	}
	if !bytes.Equal(before, snapNoIndex(t, h.s)) {
		t.Fatal("a refused command changed the state")
	}
	// Request 1 was never recorded: the owner's request 1 applies.
	h.ok(Command{Op: OpCreate, WriteHeader: right, Path: "/demo/e", Ephemeral: true})
	if err := h.s.CheckSecret(sess, "wrong"); api.CodeOf(err) != api.CodeUnauthorized {
		t.Fatalf("CheckSecret(wrong) = %v", err)
	}
	if err := h.s.CheckSecret(sess, "right"); err != nil {
		t.Fatalf("CheckSecret(right) = %v", err)
	}
	h.ok(Command{Op: OpCloseSession, WriteHeader: api.WriteHeader{Session: sess, Secret: "right"}})
}

// TestEphemeralOwnership: only the owning session or an admin may write
// or delete an ephemeral node.
func TestEphemeralOwnership(t *testing.T) {
	h := newDemo(t)
	owner := h.openWith("o", "", nil)
	other := h.openWith("x", "", nil)
	r := h.ok(Command{Op: OpCreate, WriteHeader: api.WriteHeader{Session: owner, Secret: "o"}, Path: "/demo/l/n-", Ephemeral: true, Sequential: true, MakeParents: true})
	node := r.Node.Path
	for _, c := range []struct {
		name string
		cmd  Command
		code api.Code
	}{
		{"no session", Command{Op: OpDelete, Path: node}, api.CodeForbidden},
		{"another session", Command{Op: OpDelete, WriteHeader: api.WriteHeader{Session: other, Secret: "x"}, Path: node}, api.CodeForbidden},
		{"another session's put", Command{Op: OpPut, WriteHeader: api.WriteHeader{Session: other, Secret: "x"}, Path: node, Value: []byte("v")}, api.CodeForbidden},
		{"the owner, wrong secret", Command{Op: OpDelete, WriteHeader: api.WriteHeader{Session: owner, Secret: "x"}, Path: node}, api.CodeUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) { h.fail(c.cmd, c.code) })
	}
	h.ok(Command{Op: OpPut, WriteHeader: api.WriteHeader{Session: owner, Secret: "o"}, Path: node, Value: []byte("v")})
	h.ok(Command{Op: OpDelete, Path: node, Admin: true})
	r = h.ok(Command{Op: OpCreate, WriteHeader: api.WriteHeader{Session: owner, Secret: "o"}, Path: "/demo/l/n-", Ephemeral: true, Sequential: true})
	h.ok(Command{Op: OpDelete, WriteHeader: api.WriteHeader{Session: owner, Secret: "o"}, Path: r.Node.Path})
}

// TestTenantQuota: sessions, nodes and bytes per tenant, refused with
// quota_exceeded and nothing applied; other tenants unaffected; usage
// survives a snapshot and is returned when things are freed.
func TestTenantQuota(t *testing.T) {
	h := newDemo(t)
	q := &api.Quota{Sessions: 2, Nodes: 3, Bytes: 40}
	a1 := h.openWith("a", "a", q)
	h.openWith("a", "a", q)
	h.fail(Command{Op: OpOpenSession, Tenant: "a", Quota: q}, api.CodeQuotaExceeded)
	h.openWith("b", "b", q) // another tenant's count is its own
	put := func(p, v string) Command {
		return Command{Op: OpPut, Path: p, Value: []byte(v), Tenant: "a", Quota: q, MakeParents: true}
	}
	h.ok(put("/demo/a/x", "1"))                                                        // 2 nodes (/demo/a made too), 9+7 bytes
	h.fail(put("/demo/a/y/z", "1"), api.CodeQuotaExceeded)                             // 2 more nodes: past 3
	h.fail(put("/demo/a/x", "0123456789012345678901234567890"), api.CodeQuotaExceeded) // bytes
	h.ok(put("/demo/a/w", "2"))
	h.fail(put("/demo/a/v", "3"), api.CodeQuotaExceeded)
	if _, nodes, _ := h.s.Usage("b"); nodes != 0 {
		t.Fatalf("tenant b holds %d nodes", nodes)
	}
	if s, n, b := h.s.Usage("a"); s != 2 || n != 3 || b != int64(len("/demo/a")+len("/demo/a/x")+1+len("/demo/a/w")+1) {
		t.Fatalf("usage of a = %d sessions %d nodes %d bytes", s, n, b)
	}
	restored := restore(t, h.snap())
	if s, n, _ := restored.Usage("a"); s != 2 || n != 3 {
		t.Fatalf("restored usage of a = %d sessions %d nodes", s, n)
	}
	h.ok(Command{Op: OpDelete, Path: "/demo/a/w"})
	h.ok(Command{Op: OpCloseSession, WriteHeader: api.WriteHeader{Session: a1, Secret: "a"}})
	h.ok(put("/demo/a/v", "3"))
	h.openWith("a", "a", q)
}

// TestMakeParentsStaysInGrant: make_parents creates only the ancestors
// at or below the caller's grant (ParentsFrom); one above it refuses the
// whole command, and nothing applies. Fails on mutant
// lockd_broken_parentsfrom.
func TestMakeParentsStaysInGrant(t *testing.T) {
	h := newDemo(t)
	for _, tc := range []struct {
		name, path, from string
		op               Op
		code             api.Code // "" applies
	}{
		{"create, parents above the grant", "/demo/team/alice/x", "/demo/team/alice", OpCreate, api.CodeForbidden},
		{"put, parents above the grant", "/demo/team/alice/y", "/demo/team/alice", OpPut, api.CodeForbidden},
		{"create, parents within the grant", "/demo/team2/a/b", "/demo/team2", OpCreate, ""},
		{"put, parents within the grant", "/demo/team2/c/d", "/demo/team2", OpPut, ""},
		{"admin: anywhere", "/demo/open/a/b", "", OpCreate, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Command{Op: tc.op, Path: tc.path, MakeParents: true, ParentsFrom: tc.from, Value: []byte("v")}
			if tc.code != "" {
				before := snapNoIndex(t, h.s)
				h.fail(c, tc.code)
				if !bytes.Equal(before, snapNoIndex(t, h.s)) {
					t.Fatal("a refused make_parents changed the state")
				}
				return
			}
			h.ok(c)
		})
	}
	if _, ok := h.s.Get("/demo/team"); ok {
		t.Fatal("/demo/team was created outside the grant")
	}
}
