package proxy

import (
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// a client slow to acknowledge holds an invalidation among
// more than api.MaxPendingEvents leader events; capEvents replaces them
// with one resync. The client's acknowledgement of that resync covers the
// invalidation (a write waits for it at the leader), so it must go out at
// once, as the acknowledgement of the invalidation itself would have.
func TestAttackAckOfCappedInvalidationIsUrgent(t *testing.T) {
	ps := &proxySession{id: 1, lease: 12 * time.Second, ack: ack{3, 0}}
	evs := []api.Event{{Type: api.EventInvalidate, Path: "/demo/c", Index: 1, Seq: 1}}
	for seq := uint64(2); seq <= api.MaxPendingEvents+1; seq++ {
		evs = append(evs, api.Event{Type: api.EventDataChanged, Path: "/demo/x", Index: seq, Seq: seq})
	}
	applySessionReply(ps, api.BatchSession{Session: 1, LeaseMS: 12000, Events: evs}, 3, true)
	if len(ps.events) != 1 || ps.events[0].Type != api.EventResync {
		t.Fatalf("events not capped: %d held", len(ps.events))
	}
	last := ps.events[0].Seq
	if !ps.clientAck(ack{3, last}, 3) {
		t.Fatalf("the client's ack of the resync (seq %d) covers an invalidation a write waits for, but is not urgent: "+
			"it waits for the next poll or full batch", last)
	}
}

// Held events of an older leader epoch: a new leader's events restart
// their Seq; the cap must still keep the newest.
func TestAttackCapKeepsNewest(t *testing.T) {
	evs := make([]api.Event, api.MaxPendingEvents+1)
	for i := range evs {
		evs[i] = api.Event{Type: api.EventDataChanged, Index: uint64(i + 1), Seq: uint64(i + 1)}
	}
	got := capEvents(evs)
	if len(got) != 1 || got[0].Seq != uint64(len(evs)) || got[0].Type != api.EventResync {
		t.Fatalf("cap: %+v", got)
	}
	if got := capEvents(evs[:api.MaxPendingEvents]); len(got) != api.MaxPendingEvents {
		t.Fatalf("capped at the limit: %d", len(got))
	}
}
