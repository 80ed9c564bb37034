package watch

import (
	"slices"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// TestWatchingListsArmedWatches: Watching lists a session's armed
// watches sorted, and forgets each once it fired or the session's were
// dropped.
func TestWatchingListsArmedWatches(t *testing.T) {
	tab := NewTable(sink{})
	tab.Register(1, "", "/demo/b", api.WatchData)
	tab.Register(1, "", "/demo/a", api.WatchChildren)
	tab.Register(1, "", "/demo/a", api.WatchData)
	tab.Register(2, "", "/demo/a", api.WatchData)
	steps := []struct {
		name string
		do   func()
		want []api.WatchSpec
	}{
		{"armed", func() {}, []api.WatchSpec{{Path: "/demo/a", Kind: api.WatchChildren}, {Path: "/demo/a", Kind: api.WatchData}, {Path: "/demo/b", Kind: api.WatchData}}},
		{"one fired", func() { tab.Apply([]fsm.Change{{Path: "/demo/b", Type: fsm.ChangeData, Index: 9}}, 0) },
			[]api.WatchSpec{{Path: "/demo/a", Kind: api.WatchChildren}, {Path: "/demo/a", Kind: api.WatchData}}},
		{"dropped", func() { tab.DropSession(1) }, []api.WatchSpec{}},
	}
	for _, st := range steps {
		st.do()
		if got := tab.Watching(1); !slices.Equal(got, st.want) {
			t.Fatalf("%s: Watching(1) = %v, want %v", st.name, got, st.want)
		}
	}
	if got := tab.Watching(2); len(got) != 1 {
		t.Fatalf("session 2's watches %v", got)
	}
}
