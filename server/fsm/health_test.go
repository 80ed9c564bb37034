package fsm

import (
	"testing"
)

// A staged copy's count is bounded: past MaxStagedCount it says "at
// least" instead of walking the whole copy under the state's lock.
func TestCountNodesBounded(t *testing.T) {
	root := &node{path: "/p"}
	for i := range 10 {
		root.addChild(&node{path: "/p/" + string(rune('a'+i))})
	}
	if n := countNodes(root, MaxStagedCount); n != 11 {
		t.Fatalf("%d counted, want 11", n)
	}
	if n := countNodes(root, 4); n != 4 {
		t.Fatalf("%d counted with a bound of 4", n)
	}
}
