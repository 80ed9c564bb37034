package fsm

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

// containerPut is a put with make_parents marking the parents it makes
// containers (the etcd gateway's put), uncontain as asked.
func containerPut(p, v string, uncontain bool) Command {
	return Command{Op: OpPut, Path: p, Value: []byte(v), MakeParents: true, Container: true, Uncontain: uncontain}
}

// TestPutContainers: a put with make_parents and container makes its
// missing parents containers and leaves an existing plain directory
// plain; a put of a container's own path keeps it a container unless it
// asks uncontain, which makes it a plain node as if the put created it
// (version 1, create index the put's) that its last child's delete then
// leaves in place; without uncontain the cell deletes it, value and all,
// with its last child.
func TestPutContainers(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/plain"))
	h.ok(containerPut("/demo/plain/a/b", "v", false))
	for p, want := range map[string]bool{"/demo/plain": false, "/demo/plain/a": true, "/demo/plain/a/b": false} {
		if n, _ := h.s.Get(p); n.Container != want {
			t.Fatalf("%s: container %v, want %v", p, n.Container, want)
		}
	}

	// Without uncontain: the value goes with the last child.
	h.ok(putCmd("/demo/plain/a", "kept?", nil))
	if n, _ := h.s.Get("/demo/plain/a"); !n.Container || n.Version != 2 {
		t.Fatalf("a plain put of a container: %+v", n)
	}
	h.ok(delCmd("/demo/plain/a/b", nil))
	if _, ok := h.s.Get("/demo/plain/a"); ok {
		t.Fatal("the container outlived its last child")
	}

	// With uncontain: a key from then on.
	h.ok(containerPut("/demo/plain/a/b", "v", false))
	seqBefore := h.s.containerSeq
	h.ok(seqCmd("/demo/plain/a/q-"))
	h.ok(seqCmd("/demo/plain/a/q-"))
	at := h.ok(containerPut("/demo/plain/a", "key", true)).Index
	n, _ := h.s.Get("/demo/plain/a")
	if n.Container || n.Version != 1 || n.CreateIndex != at || n.ModifyIndex != at || string(n.Value) != "key" {
		t.Fatalf("an uncontaining put: %+v, want a plain node at version 1 created at %d", n, at)
	}
	if h.s.containerSeq < seqBefore+2 {
		t.Fatalf("containerSeq %d: the uncontained node's counter (%d numbers) was not folded in", h.s.containerSeq, 2)
	}
	for _, p := range []string{"/demo/plain/a/b", "/demo/plain/a/q-0000000000", "/demo/plain/a/q-0000000001"} {
		h.ok(delCmd(p, nil))
	}
	if n, ok := h.s.Get("/demo/plain/a"); !ok || string(n.Value) != "key" {
		t.Fatalf("the uncontained key was deleted with its last child: %v %+v", ok, n)
	}
	// Uncontain on a plain node is a plain put.
	if r := h.ok(containerPut("/demo/plain/a", "again", true)); r.Node.Version != 2 || r.Node.CreateIndex != at {
		t.Fatalf("uncontain of a plain node: %+v", r.Node)
	}
}

// TestTxnUncontain: a txn write carries container and uncontain as the
// single put does; a container compares as missing until uncontained.
func TestTxnUncontain(t *testing.T) {
	h := newDemo(t)
	w := func(p, v string, uncontain bool) TxnOp {
		return TxnOp{TxnOp: api.TxnOp{Op: api.TxnPut, Path: p, Value: []byte(v), MakeParents: true, Container: true, Uncontain: uncontain}}
	}
	missing := []api.TxnCond{{If: api.CondCreateRev, Path: "/demo/d", Cmp: api.CmpEqual, Rev: 0}}
	h.ok(txnCmd(missing, w("/demo/d/x", "x", false)))
	if n, _ := h.s.Get("/demo/d"); !n.Container {
		t.Fatal("a txn put's parent is not a container")
	}
	at := h.ok(txnCmd(missing, w("/demo/d", "d", true))).Index // a container is no key: create_rev 0 holds
	if n, _ := h.s.Get("/demo/d"); n.Container || n.CreateIndex != at || n.Version != 1 {
		t.Fatalf("after an uncontaining txn put: %+v", n)
	}
	h.fail(txnCmd(missing, w("/demo/d", "d2", true)), api.CodeConditionFailed) // a key now
	h.ok(txnCmd(nil, tdelete("/demo/d/x")))
	if _, ok := h.s.Get("/demo/d"); !ok {
		t.Fatal("the uncontained key went with its last child")
	}
}
