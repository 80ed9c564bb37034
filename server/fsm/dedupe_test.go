package fsm

import (
	"bytes"
	"testing"

	"github.com/lockservice/lockd/api"
)

// retry applies c again and checks it answers first byte for byte, with no
// changes and nothing applied.
func retry(t *testing.T, h *harness, c Command, first []byte) {
	t.Helper()
	before := snapNoIndex(t, h.s)
	h.apply(c)
	if !bytes.Equal(h.raw, first) {
		t.Fatalf("retry of request %d: %s, want the first answer %s", c.Request, h.raw, first)
	}
	if len(h.changes) != 0 {
		t.Fatalf("retry reported changes %v", h.changes)
	}
	if after := snapNoIndex(t, h.s); !bytes.Equal(before, after) {
		t.Fatalf("retry changed the state:\n%s\n%s", before, after)
	}
}

func TestDedupeRetryReturnsFirstResult(t *testing.T) {
	tests := []struct {
		name string
		cmd  func(sess uint64) Command
		// after is applied between the first attempt and the retry; the
		// retry must still answer the first result even though a fresh
		// attempt would now answer otherwise.
		after func(h *harness, sess uint64)
		code  api.Code
	}{
		{
			name:  "sequential create",
			cmd:   func(uint64) Command { return seqCmd("/demo/w-") },
			after: func(*harness, uint64) {},
		},
		{
			name:  "ephemeral create",
			cmd:   func(sess uint64) Command { return ephCmd(sess, "/demo/e") },
			after: func(h *harness, _ uint64) { h.ok(delCmd("/demo/e", nil)) },
		},
		{
			name:  "put",
			cmd:   func(uint64) Command { return putCmd("/demo/p", "v", nil) },
			after: func(h *harness, _ uint64) { h.ok(putCmd("/demo/p", "other", nil)) },
		},
		{
			name:  "delete",
			cmd:   func(uint64) Command { return delCmd("/demo/d", nil) },
			after: func(h *harness, _ uint64) { h.ok(createCmd("/demo/d")) },
		},
		{
			name:  "failed create: same error even once it would succeed",
			cmd:   func(uint64) Command { return createCmd("/demo/missing/x") },
			after: func(h *harness, _ uint64) { h.ok(createCmd("/demo/missing")) },
			code:  api.CodeNoNode,
		},
		{
			name:  "failed CAS put",
			cmd:   func(uint64) Command { return putCmd("/demo/d", "v", u64(7)) },
			after: func(h *harness, _ uint64) {},
			code:  api.CodeVersionMismatch,
		},
		{
			name: "lock create",
			cmd: func(sess uint64) Command {
				return lockCmd(sess, "/demo", api.LockExclusive)
			},
			after: func(h *harness, sess uint64) { h.ok(lockCmd(sess, "/demo", api.LockExclusive)) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newDemo(t)
			h.ok(createCmd("/demo/d"))
			sess := h.open()
			c := req(tt.cmd(sess), sess, 1, 0)
			r := h.apply(c)
			if errCode(r) != tt.code {
				t.Fatalf("first attempt: %v, want code %q", r.Err, tt.code)
			}
			first := append([]byte(nil), h.raw...)
			retry(t, h, c, first)
			tt.after(h, sess)
			retry(t, h, c, first)
			// Also after a snapshot round trip.
			rh := harnessOn(t, restore(t, h.snap()))
			retry(t, rh, c, first)
		})
	}
}

func TestDedupeSequentialCounterAdvancesOnce(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	c := req(seqCmd("/demo/w-"), sess, 1, 0)
	p1 := h.ok(c).Node.Path
	for range 3 {
		if got := h.apply(c).Node.Path; got != p1 {
			t.Fatalf("retry created %s, want %s", got, p1)
		}
	}
	if got := h.ok(req(seqCmd("/demo/w-"), sess, 2, 0)).Node.Path; got != "/demo/w-0000000001" {
		t.Fatalf("next sequential: %s, want /demo/w-0000000001", got)
	}
	if _, kids, _ := h.s.Children("/demo"); len(kids) != 2 {
		t.Fatalf("children %v, want two", kids)
	}
}

// Without a session (or without a request id) nothing is deduplicated: the
// same command applies again.
func TestNoDedupeWithoutRequestID(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	for _, c := range []Command{seqCmd("/demo/a-"), req(seqCmd("/demo/b-"), sess, 0, 0)} {
		p1 := h.ok(c).Node.Path
		p2 := h.ok(c).Node.Path
		if p1 == p2 {
			t.Fatalf("%+v applied once: %s", c, p1)
		}
	}
	h.ok(putCmd("/demo/p", "x", nil))
	h.ok(putCmd("/demo/p", "x", nil))
	if n, _ := h.s.Get("/demo/p"); n.Version != 2 {
		t.Fatalf("version %d, want 2", n.Version)
	}
}

func TestDedupeAck(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	var results [][]byte
	for id := uint64(1); id <= 3; id++ {
		h.ok(req(seqCmd("/demo/w-"), sess, id, 0))
		results = append(results, append([]byte(nil), h.raw...))
	}
	// Request 4 acks everything below 3.
	h.ok(req(seqCmd("/demo/w-"), sess, 4, 3))
	if n := len(h.s.sessions[sess].results); n != 2 {
		t.Fatalf("%d results kept after ack 3, want 2 (ids 3 and 4)", n)
	}
	for _, id := range []uint64{1, 2} {
		h.fail(req(seqCmd("/demo/w-"), sess, id, 0), api.CodeStaleRequest)
	}
	retry(t, h, req(seqCmd("/demo/w-"), sess, 3, 0), results[2])
	// An ack never goes down.
	h.ok(req(seqCmd("/demo/w-"), sess, 5, 1))
	h.fail(req(seqCmd("/demo/w-"), sess, 2, 0), api.CodeStaleRequest)
	// Stale requests survive a snapshot.
	rh := harnessOn(t, restore(t, h.snap()))
	rh.fail(req(seqCmd("/demo/w-"), sess, 1, 0), api.CodeStaleRequest)
	retry(t, rh, req(seqCmd("/demo/w-"), sess, 3, 0), results[2])
	// Counter: five creates, no retry applied.
	if got := rh.ok(seqCmd("/demo/w-")).Node.Path; got != "/demo/w-0000000005" {
		t.Fatalf("next sequential %s", got)
	}
}

func TestDedupeWindowOverflow(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	const n = api.MaxSessionRequestWindow + 1
	results := map[uint64][]byte{}
	for id := uint64(1); id <= n; id++ {
		h.ok(req(seqCmd("/demo/w-"), sess, id, 0))
		results[id] = append([]byte(nil), h.raw...)
	}
	if got := len(h.s.sessions[sess].results); got != api.MaxSessionRequestWindow {
		t.Fatalf("window holds %d results, want %d", got, api.MaxSessionRequestWindow)
	}
	// The oldest is forgotten, and is stale rather than re-applied.
	h.fail(req(seqCmd("/demo/w-"), sess, 1, 0), api.CodeStaleRequest)
	// The rest are still deduplicated.
	retry(t, h, req(seqCmd("/demo/w-"), sess, 2, 0), results[2])
	retry(t, h, req(seqCmd("/demo/w-"), sess, n, 0), results[n])
	// One more pushes out id 2.
	h.ok(req(seqCmd("/demo/w-"), sess, n+1, 0))
	h.fail(req(seqCmd("/demo/w-"), sess, 2, 0), api.CodeStaleRequest)
	retry(t, h, req(seqCmd("/demo/w-"), sess, 3, 0), results[3])
}

func TestDedupeOutOfOrderInsideWindow(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	c5 := req(createCmd("/demo/five"), sess, 5, 0)
	c3 := req(createCmd("/demo/three"), sess, 3, 0)
	h.ok(c5)
	r5 := append([]byte(nil), h.raw...)
	h.ok(c3) // lower id, arriving later: applies
	r3 := append([]byte(nil), h.raw...)
	for _, p := range []string{"/demo/five", "/demo/three"} {
		if _, ok := h.s.Get(p); !ok {
			t.Fatalf("%s was not created", p)
		}
	}
	retry(t, h, c5, r5)
	retry(t, h, c3, r3)
	h.ok(req(createCmd("/demo/four"), sess, 4, 0)) // the gap fills too
	ids := []uint64{}
	for _, r := range h.s.sessions[sess].results {
		ids = append(ids, r.id)
	}
	if len(ids) != 3 || ids[0] != 3 || ids[1] != 4 || ids[2] != 5 {
		t.Fatalf("window ids %v, want [3 4 5]", ids)
	}
}

// Dedupe is per session: the same request id on another session applies.
func TestDedupePerSession(t *testing.T) {
	h := newDemo(t)
	s1, s2 := h.open(), h.open()
	a := h.ok(req(seqCmd("/demo/w-"), s1, 1, 0)).Node.Path
	b := h.ok(req(seqCmd("/demo/w-"), s2, 1, 0)).Node.Path
	if a == b {
		t.Fatalf("both sessions got %s", a)
	}
}

func TestDedupeEndedAndUnknownSession(t *testing.T) {
	h := newDemo(t)
	sess := h.open()
	c := req(createCmd("/demo/x"), sess, 1, 0)
	h.ok(c)
	h.ok(closeCmd(sess))
	// Even a retry of an answered request: the session is gone.
	h.fail(c, api.CodeSessionExpired)
	h.fail(req(createCmd("/demo/y"), 999, 1, 0), api.CodeNoSession)
}
