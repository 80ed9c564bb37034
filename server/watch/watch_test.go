package watch

import (
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

type sink map[uint64][]api.Event

func (s sink) Deliver(id uint64, ev api.Event) { s[id] = append(s[id], ev) }

func TestFireOnceAndOnlyTheMatchingKind(t *testing.T) {
	got := sink{}
	tab := NewTable(got)
	tab.Register(1, "", "/demo/a", api.WatchData)
	tab.Register(1, "", "/demo/a", api.WatchData) // twice is one watch
	tab.Register(2, "", "/demo/a", api.WatchChildren)
	tab.Register(3, "", "/demo", api.WatchChildren)

	// A put fires data watches only; a second put fires nothing (one-shot).
	if n := tab.Apply([]fsm.Change{{Path: "/demo/a", Type: fsm.ChangeData, Index: 5}}, 0); n != 1 {
		t.Fatalf("put fired %d", n)
	}
	if n := tab.Apply([]fsm.Change{{Path: "/demo/a", Type: fsm.ChangeData, Index: 6}}, 0); n != 0 {
		t.Fatalf("second put fired %d", n)
	}
	// A delete fires the children watch on the node (deleted) and the
	// parent's children watch.
	n := tab.Apply([]fsm.Change{{Path: "/demo/a", Type: fsm.ChangeDeleted, Index: 7}, {Path: "/demo", Type: fsm.ChangeChildren, Index: 7}}, 0)
	if n != 2 {
		t.Fatalf("delete fired %d", n)
	}
	want := map[uint64]api.Event{
		1: {Type: api.EventDataChanged, Path: "/demo/a", Kind: api.WatchData, Index: 5},
		2: {Type: api.EventDeleted, Path: "/demo/a", Kind: api.WatchChildren, Index: 7},
		3: {Type: api.EventChildrenChanged, Path: "/demo", Kind: api.WatchChildren, Index: 7},
	}
	for id, ev := range want {
		if len(got[id]) != 1 || got[id][0] != ev {
			t.Errorf("session %d got %v, want [%v]", id, got[id], ev)
		}
	}
	if armed, fired := tab.Stats(); armed != 0 || fired != 3 {
		t.Errorf("armed %d fired %d", armed, fired)
	}
}

func TestDropSessionAndReset(t *testing.T) {
	got := sink{}
	tab := NewTable(got)
	tab.Register(1, "", "/demo/a", api.WatchData)
	tab.Register(2, "", "/demo/a", api.WatchData)
	tab.DropSession(1)
	tab.Apply([]fsm.Change{{Path: "/demo/a", Type: fsm.ChangeCreated, Index: 3}}, 0)
	if len(got[1]) != 0 || len(got[2]) != 1 || got[2][0].Type != api.EventCreated {
		t.Fatalf("after drop: %v", got)
	}
	tab.Register(2, "", "/demo/b", api.WatchData)
	tab.Reset()
	if armed, _ := tab.Stats(); armed != 0 {
		t.Fatalf("%d armed after reset", armed)
	}
}

// A session's own delete consumes its watches on the node without an
// event (its client learns of the delete from the reply); every other
// session still gets its event. A lock release so costs one event.
func TestOwnDeleteFiresOthersOnly(t *testing.T) {
	got := sink{}
	tab := NewTable(got)
	tab.Register(1, "", "/demo/l/w-1", api.WatchData) // the holder's own-node watch
	tab.Register(2, "", "/demo/l/w-1", api.WatchData) // the next waiter's
	if n := tab.Apply([]fsm.Change{{Path: "/demo/l/w-1", Type: fsm.ChangeDeleted, Index: 9}}, 1); n != 1 {
		t.Fatalf("release delivered %d events, want 1", n)
	}
	if len(got[1]) != 0 || len(got[2]) != 1 {
		t.Fatalf("events %v", got)
	}
	if armed, fired := tab.Stats(); armed != 0 || fired != 1 {
		t.Fatalf("armed %d fired %d: the deleter's watch must be consumed too", armed, fired)
	}
	// Deleted by someone else (or by expiry, by = 0): the holder hears it.
	tab.Register(1, "", "/demo/l/w-2", api.WatchData)
	if n := tab.Apply([]fsm.Change{{Path: "/demo/l/w-2", Type: fsm.ChangeDeleted, Index: 10}}, 3); n != 1 || len(got[1]) != 1 {
		t.Fatalf("delete by another session delivered %d, holder got %v", n, got[1])
	}
}

// TestTenantCounts: a tenant's count is the watches all its sessions
// have armed; firing, dropping a session and a reset give them back.
func TestTenantCounts(t *testing.T) {
	tab := NewTable(&sink{})
	tab.Register(1, "t", "/demo/a", api.WatchData)
	tab.Register(1, "t", "/demo/a", api.WatchData) // twice is one watch
	tab.Register(1, "t", "/demo/b", api.WatchData)
	tab.Register(2, "t", "/demo/a", api.WatchData)
	tab.Register(3, "u", "/demo/a", api.WatchChildren)
	tab.Register(4, "", "/demo/c", api.WatchData)
	for _, step := range []struct {
		name string
		do   func()
		t, u int
	}{
		{"registered", func() {}, 3, 1},
		{"/demo/a's data watches fire", func() { tab.Apply([]fsm.Change{{Path: "/demo/a", Type: fsm.ChangeData, Index: 9}}, 0) }, 1, 1},
		{"session 1 ends", func() { tab.DropSession(1) }, 0, 1},
		{"reset", tab.Reset, 0, 0},
	} {
		step.do()
		if got, gotU := tab.ArmedByTenant("t"), tab.ArmedByTenant("u"); got != step.t || gotU != step.u {
			t.Fatalf("%s: t has %d, u %d; want %d, %d", step.name, got, gotU, step.t, step.u)
		}
	}
}
