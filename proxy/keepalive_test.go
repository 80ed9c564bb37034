package proxy

import (
	"testing"
	"time"
)

// TestNextKAStep: what a held KeepAlive does next, by the session's state
// and the clock. Lease 12 s, wait 6 s: deadline t0+6 s, confirmBy
// t0+7.9 s, stale after 4 s without an answer from the leader.
func TestNextKAStep(t *testing.T) {
	const lease = 12 * time.Second
	clk := newKAClock(t0, 6_000, lease)
	if clk.deadline != t0.Add(6*time.Second) || clk.confirmBy != t0.Add(7900*time.Millisecond) || clk.stale != 4*time.Second {
		t.Fatalf("clock = %+v", clk)
	}
	if got := newKAClock(t0, 60_000, lease).deadline; got != t0.Add(lease/2) {
		t.Fatalf("wait not capped at lease/2: deadline %v", got)
	}
	if clk.holdUntil(false) != clk.deadline || clk.holdUntil(true) != clk.confirmBy {
		t.Fatal("holdUntil")
	}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// A session confirmed a second before its KeepAlive arrived, the
	// leader answering: held until its wait ends.
	base := func(v kaView) kaView {
		v.clk, v.lease = clk, lease
		if v.now.IsZero() {
			v.now = at(time.Second)
		}
		return v
	}
	recent, old := at(-time.Second), at(-4*time.Second) // old: over lease/4 before arrival
	for _, tc := range []struct {
		name string
		v    kaView
		want kaStep
	}{
		{"ended session", kaView{failed: true, base: recent, lastReply: at(0)}, kaFailed},
		{"ended unconfirmed session", kaView{failed: true}, kaFailed},
		{"unconfirmed, in time", kaView{now: at(7 * time.Second)}, kaHold},
		{"unconfirmed with events still holds", kaView{toDeliver: true, behind: true}, kaHold},
		{"unconfirmed at confirmBy", kaView{now: at(7900 * time.Millisecond)}, kaUnconfirmed},
		{"unconfirmed, superseded", kaView{superseded: true}, kaUnconfirmed},
		{"nothing to say", kaView{base: recent, lastReply: at(0)}, kaHold},
		{"events", kaView{base: recent, lastReply: at(0), toDeliver: true}, kaAnswer},
		{"behind the epoch", kaView{base: recent, lastReply: at(0), behind: true}, kaAnswer},
		{"superseded", kaView{base: recent, lastReply: at(0), superseded: true}, kaAnswer},
		{"wait over, lease recent", kaView{now: at(6 * time.Second), base: recent, lastReply: at(5 * time.Second)}, kaAnswer},
		{"wait over, lease old: await the batch", kaView{now: at(6 * time.Second), base: old, lastReply: at(5 * time.Second)}, kaAwaitBatch},
		{"awaiting, still in time", kaView{now: at(7 * time.Second), base: old, lastReply: at(5 * time.Second), awaitBatch: true}, kaAwaitBatch},
		{"awaiting, at confirmBy", kaView{now: at(7900 * time.Millisecond), base: old, lastReply: at(5 * time.Second), awaitBatch: true}, kaAnswer},
		{"lease old, events", kaView{now: at(6 * time.Second), base: old, lastReply: at(5 * time.Second), toDeliver: true}, kaAnswer},
		{"lease old, superseded", kaView{now: at(6 * time.Second), base: old, lastReply: at(5 * time.Second), superseded: true}, kaAnswer},
		{"lease old, wait not over", kaView{now: at(5 * time.Second), base: old, lastReply: at(5 * time.Second)}, kaHold},
		{"leader silent, wait over", kaView{now: at(6 * time.Second), base: recent, lastReply: at(time.Second)}, kaUnreachable},
		{"leader silent, the open recent", kaView{now: at(6 * time.Second), base: at(3 * time.Second), lastReply: at(-time.Minute)}, kaAnswer},
		{"leader silent, wait not over", kaView{now: at(5 * time.Second), base: recent, lastReply: at(-time.Minute)}, kaHold},
		{"leader silent while awaiting the batch", kaView{now: at(6 * time.Second), base: old, lastReply: at(-time.Minute), awaitBatch: true}, kaAwaitBatch},
	} {
		if got := nextKAStep(base(tc.v)); got != tc.want {
			t.Errorf("%s: step %d, want %d", tc.name, got, tc.want)
		}
	}
}
