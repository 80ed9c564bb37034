package cell

import (
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// TestChangeWaiters: a held change read wakes on a node change at or
// under its root only (not a sibling sharing its name's start, not a
// children-only or lock-delay change), every read wakes when leadership
// goes, and the table holds at most api.MaxChangesWaiters.
func TestChangeWaiters(t *testing.T) {
	woken := func(w *changeWaiter) bool {
		select {
		case <-w.ch:
			return true
		default:
			return false
		}
	}
	for _, tc := range []struct {
		name   string
		change fsm.Change
		wakes  bool
	}{
		{"the root itself", fsm.Change{Path: "/demo/a", Type: fsm.ChangeData}, true},
		{"a node under it", fsm.Change{Path: "/demo/a/x/y", Type: fsm.ChangeCreated}, true},
		{"a delete under it", fsm.Change{Path: "/demo/a/x", Type: fsm.ChangeDeleted}, true},
		{"a sibling sharing the name's start", fsm.Change{Path: "/demo/ab", Type: fsm.ChangeData}, false},
		{"the parent", fsm.Change{Path: "/demo", Type: fsm.ChangeData}, false},
		{"children only", fsm.Change{Path: "/demo/a", Type: fsm.ChangeChildren}, false},
		{"a lock-delay", fsm.Change{Path: "/demo/a/l", Type: fsm.ChangeLockDelay}, false},
	} {
		var tab changeWaiters
		w, ok := tab.arm("/demo/a")
		if !ok {
			t.Fatal("an empty table refused a waiter")
		}
		tab.wake([]fsm.Change{tc.change})
		if woken(w) != tc.wakes {
			t.Errorf("%s: woken %v, want %v", tc.name, woken(w), tc.wakes)
		}
		tab.disarm(w) // twice (after a wake) is harmless
		tab.disarm(w)
		if tab.n.Load() != 0 {
			t.Errorf("%s: %d waiters left", tc.name, tab.n.Load())
		}
	}
	var tab changeWaiters
	var ws []*changeWaiter
	for i := 0; i < api.MaxChangesWaiters; i++ {
		w, ok := tab.arm("/demo/x")
		if !ok {
			t.Fatalf("waiter %d refused below the bound", i)
		}
		ws = append(ws, w)
	}
	if _, ok := tab.arm("/demo/x"); ok {
		t.Fatalf("a waiter past MaxChangesWaiters (%d) was held", api.MaxChangesWaiters)
	}
	tab.wakeAll()
	for i, w := range ws {
		if !woken(w) {
			t.Fatalf("waiter %d not woken when leadership went", i)
		}
	}
	if _, ok := tab.arm("/demo/x"); !ok {
		t.Fatal("the table stays full after every waiter went")
	}
}
