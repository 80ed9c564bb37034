package fsm

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

func TestWatchCheck(t *testing.T) {
	h := newDemo(t)
	demo := h.idx                         // /demo created
	a := h.ok(createCmd("/demo/a")).Index // /demo/a created
	aPut := h.ok(putCmd("/demo/a", "v", nil)).Index
	aKid := h.ok(createCmd("/demo/a/k")).Index // moves /demo/a's child index
	h.ok(createCmd("/demo/x"))                 // a quiet directory
	xMade := h.idx
	gone := h.ok(createCmd("/demo/x/gone")).Index
	goneDel := h.ok(delCmd("/demo/x/gone", nil)).Index
	h.ok(putCmd("/demo/a/k", "v", nil)) // data change below /demo/a: not a child change
	kPut := h.idx
	h.ok(createCmd("/demo/y"))
	h.ok(createCmd("/demo/y/z"))
	h.ok(delCmd("/demo/y/z", nil))
	yDel := h.ok(delCmd("/demo/y", nil)).Index // /demo/y and its child both gone
	pMade := h.ok(createCmd("/demo/p")).Index
	h.ok(putCmd("/demo/p", "v", nil))
	last := h.idx

	type want struct {
		ev   api.EventType
		fire bool
	}
	none := want{"", false}
	tests := []struct {
		name  string
		path  string
		kind  api.WatchKind
		since uint64
		want  want
	}{
		{"data: created after since", "/demo/a", api.WatchData, a - 1, want{api.EventCreated, true}},
		{"data: modified after since", "/demo/a", api.WatchData, a, want{api.EventDataChanged, true}},
		{"data: modified just after since", "/demo/a", api.WatchData, aPut - 1, want{api.EventDataChanged, true}},
		{"data: not modified since", "/demo/a", api.WatchData, aPut, none},
		{"data: a child create is not a data change", "/demo/a", api.WatchData, aKid, none},
		{"data: long after", "/demo/a", api.WatchData, last, none},
		{"data: prefix root", "/demo", api.WatchData, demo, none},
		{"data: prefix root created after", "/demo", api.WatchData, demo - 1, want{api.EventCreated, true}},

		{"children: child created after since", "/demo/a", api.WatchChildren, aKid - 1, want{api.EventChildrenChanged, true}},
		{"children: no child change since", "/demo/a", api.WatchChildren, aKid, none},
		{"children: a grandchild's put is not a child change", "/demo/a", api.WatchChildren, kPut - 1, none},
		{"children: put is not a child change", "/demo/p", api.WatchChildren, pMade, none},
		{"data: put after since", "/demo/p", api.WatchData, pMade, want{api.EventDataChanged, true}},
		{"children: child created and deleted", "/demo/x", api.WatchChildren, gone - 1, want{api.EventChildrenChanged, true}},
		{"children: child deleted after since", "/demo/x", api.WatchChildren, goneDel - 1, want{api.EventChildrenChanged, true}},
		{"children: quiet since delete", "/demo/x", api.WatchChildren, goneDel, none},
		{"children: node created after since", "/demo/x", api.WatchChildren, xMade - 1, want{api.EventChildrenChanged, true}},

		{"missing: created and deleted after since", "/demo/x/gone", api.WatchData, gone - 1, want{api.EventDeleted, true}},
		{"missing: deleted after since", "/demo/x/gone", api.WatchData, goneDel - 1, want{api.EventDeleted, true}},
		{"missing: nothing below the ancestor since", "/demo/x/gone", api.WatchData, goneDel, none},
		{"missing: never existed, quiet parent", "/demo/x/never", api.WatchData, goneDel, none},
		{"missing: never existed, parent moved", "/demo/x/never", api.WatchData, goneDel - 1, want{api.EventDeleted, true}},
		{"missing: deep, nearest ancestor quiet", "/demo/x/no/such/node", api.WatchData, goneDel, none},
		{"missing: deep, nearest ancestor moved", "/demo/x/no/such/node", api.WatchData, gone - 1, want{api.EventDeleted, true}},
		{"missing: its parent deleted too", "/demo/y/z", api.WatchData, yDel - 1, want{api.EventDeleted, true}},
		{"missing: parent deleted, grandparent quiet", "/demo/y/z", api.WatchData, last, none},
		{"missing: unknown prefix, root quiet", "/nowhere/x", api.WatchData, demo, none},
		{"missing: unknown prefix, root moved", "/nowhere/x", api.WatchData, demo - 1, want{api.EventDeleted, true}},
		{"missing prefix root", "/nowhere", api.WatchData, demo, none},

		{"missing with children watch: deleted", "/demo/x/gone", api.WatchChildren, last, want{api.EventDeleted, true}},
		{"missing with children watch, never existed", "/demo/q", api.WatchChildren, last, want{api.EventDeleted, true}},
	}
	check := func(t *testing.T, s *State) {
		for _, tt := range tests {
			ev, fire := s.WatchCheck(tt.path, tt.kind, tt.since)
			if fire != tt.want.fire || ev != tt.want.ev {
				t.Errorf("%s: WatchCheck(%s, %s, %d) = %q %v, want %q %v", tt.name, tt.path, tt.kind, tt.since, ev, fire, tt.want.ev, tt.want.fire)
			}
		}
	}
	check(t, h.s)
	t.Run("restored", func(t *testing.T) { check(t, restore(t, h.snap())) })
}

// A node deleted and re-created after since fires Created on a data watch;
// a data watch on an ephemeral fires once its session's expiry removes it.
func TestWatchCheckRecreateAndExpiry(t *testing.T) {
	h := newDemo(t)
	h.ok(createCmd("/demo/n"))
	since := h.idx
	h.ok(delCmd("/demo/n", nil))
	h.ok(createCmd("/demo/n"))
	if ev, fire := h.s.WatchCheck("/demo/n", api.WatchData, since); !fire || ev != api.EventCreated {
		t.Fatalf("re-created node: %q %v", ev, fire)
	}
	sess := h.open()
	h.ok(ephCmd(sess, "/demo/e"))
	since = h.idx
	if _, fire := h.s.WatchCheck("/demo/e", api.WatchData, since); fire {
		t.Fatal("fired before anything happened")
	}
	h.ok(expireCmd(sess, h.s.Epoch()))
	if ev, fire := h.s.WatchCheck("/demo/e", api.WatchData, since); !fire || ev != api.EventDeleted {
		t.Fatalf("expired ephemeral: %q %v", ev, fire)
	}
}
