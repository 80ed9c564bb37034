package fsm

import (
	"bytes"
	"testing"

	"github.com/lockservice/lockd/api"
)

// permitCmd is a permit's create in dir of a semaphore of n permits.
func permitCmd(sess uint64, dir string, n int64) Command {
	c := lockCmd(sess, dir, api.LockPermit)
	c.Permits, c.MakeParents = n, true
	return c
}

// maxSemaphoreQueue bounds the queues the semaphore tests build.
const maxSemaphoreQueue = 12

// TestSemaphoreOneReleaseWakesOne: for N of 1 to 4 and a queue of twice
// as many permits, every release of a holder reports exactly one data
// change, on the one waiter it lets in (the next in line), and that
// waiter holds from that entry on; at no point do more than N hold, and
// the holders' tokens rise in queue order.
func TestSemaphoreOneReleaseWakesOne(t *testing.T) {
	for n := int64(1); n <= 4; n++ {
		h := newDemo(t)
		var nodes []string
		var owners []uint64
		for i := int64(0); i < 2*n && i < maxSemaphoreQueue; i++ {
			s := h.open()
			r := h.ok(permitCmd(s, "/demo/sem", n))
			if granted := r.WaitFor == ""; granted != (i < n) {
				t.Fatalf("N=%d: permit %d granted %v at create", n, i, granted)
			}
			nodes, owners = append(nodes, r.Node.Path), append(owners, s)
		}
		for i := range nodes {
			h.ok(Command{Op: OpDelete, Path: nodes[i], WriteHeader: api.WriteHeader{Session: owners[i]}})
			var woken []string
			for _, ch := range h.changes {
				if ch.Type == ChangeData {
					woken = append(woken, ch.Path)
				}
			}
			want := []string{}
			if heir := i + int(n); heir < len(nodes) {
				want = []string{nodes[heir]}
			}
			if len(woken) != len(want) || (len(want) == 1 && woken[0] != want[0]) {
				t.Fatalf("N=%d: release of %s woke %v, want %v", n, nodes[i], woken, want)
			}
			checkSemaphoreHolders(t, h.s, "/demo/sem", int(n))
		}
	}
}

// checkSemaphoreHolders fails unless at most n lock nodes hold dir and
// their tokens rise in queue order.
func checkSemaphoreHolders(t *testing.T, s *State, dir string, n int) {
	t.Helper()
	_, holders := s.CheckToken(dir, 0)
	if len(holders) > n {
		t.Fatalf("%s: %d holders %v, at most %d", dir, len(holders), holders, n)
	}
	for i := 1; i < len(holders); i++ {
		if holders[i] <= holders[i-1] {
			t.Fatalf("%s: holder tokens %v do not rise", dir, holders)
		}
	}
}

// TestSemaphoreRefusals: a permit create that does not fit the lock
// nodes present is refused with a stable code and changes nothing.
func TestSemaphoreRefusals(t *testing.T) {
	h := newDemo(t)
	s := h.open()
	h.ok(permitCmd(s, "/demo/sem", 3))
	h.ok(lockCmd(s, "/demo", api.LockExclusive)) // /demo is a mutex's directory
	cases := []struct {
		name string
		cmd  Command
		code api.Code
	}{
		{"another N", permitCmd(s, "/demo/sem", 4), api.CodePermitsMismatch},
		{"a mutex node in a semaphore", lockCmd(s, "/demo/sem", api.LockExclusive), api.CodePermitsMismatch},
		{"a shared node in a semaphore", lockCmd(s, "/demo/sem", api.LockShared), api.CodePermitsMismatch},
		{"a permit in a mutex", permitCmd(s, "/demo", 3), api.CodePermitsMismatch},
		{"N of 0", permitCmd(s, "/demo/other", 0), api.CodeBadRequest},
		{"N negative", permitCmd(s, "/demo/other", -2), api.CodeBadRequest},
		{"N past MaxPermits", permitCmd(s, "/demo/other", api.MaxPermits+1), api.CodeBadRequest},
		{"permits on a mutex node", func() Command { c := lockCmd(s, "/demo/sem", api.LockExclusive); c.Permits = 3; return c }(), api.CodeBadRequest},
		{"permits on a plain node", Command{Op: OpCreate, Path: "/demo/plain", Permits: 3}, api.CodeBadRequest},
	}
	for _, tc := range cases {
		before := snapNoIndex(t, h.s)
		h.fail(tc.cmd, tc.code)
		if !bytes.Equal(before, snapNoIndex(t, h.s)) {
			t.Fatalf("%s: the refused create changed the state", tc.name)
		}
	}
	h.ok(permitCmd(s, "/demo/other", api.MaxPermits))
}

// TestSemaphoreSnapshotRoundTrip: a semaphore's permits (N) survive a
// snapshot: the restored state answers the queue alike, refuses another
// N, and applies the same release to the same result and changes.
func TestSemaphoreSnapshotRoundTrip(t *testing.T) {
	h := newDemo(t)
	var nodes []string
	var owners []uint64
	for range 5 {
		s := h.open()
		nodes, owners = append(nodes, h.ok(permitCmd(s, "/demo/sem", 2)).Node.Path), append(owners, s)
	}
	b := h.snap()
	h2 := harnessOn(t, restore(t, b))
	if !bytes.Equal(b, snapBytes(t, h2.s)) {
		t.Fatal("a restored semaphore writes another snapshot")
	}
	n1, use1, ok1 := h.s.SemaphoreOf("/demo/sem")
	n2, use2, ok2 := h2.s.SemaphoreOf("/demo/sem")
	if !ok1 || !ok2 || n1 != 2 || n2 != 2 || use1 != 2 || use2 != 2 {
		t.Fatalf("semaphore before %d/%d %v, after %d/%d %v; want 2 of 2", use1, n1, ok1, use2, n2, ok2)
	}
	del := Command{Op: OpDelete, Path: nodes[0], WriteHeader: api.WriteHeader{Session: owners[0]}}
	r1, r2 := h.ok(del), h2.ok(del)
	if r1.Index != r2.Index || len(h.changes) != len(h2.changes) {
		t.Fatalf("release applied differently after the restore: %v vs %v", h.changes, h2.changes)
	}
	for i := range h.changes {
		if h.changes[i] != h2.changes[i] {
			t.Fatalf("release applied differently after the restore: %v vs %v", h.changes, h2.changes)
		}
	}
	h2.fail(permitCmd(owners[1], "/demo/sem", 3), api.CodePermitsMismatch)
	if !bytes.Equal(snapNoIndex(t, h.s), snapNoIndex(t, h2.s)) {
		t.Fatal("states differ after the same release")
	}
}
