package cell

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// TestRerunLosesNoCall (mutant lockd_broken_adopt_wakeup): a call while a
// pass runs returns at once and the running call makes one more pass
// after its own (the placement that came during the pass is adopted);
// calls at rest make one pass each.
func TestRerunLosesNoCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r rerun
		var passes atomic.Int32
		release := make(chan struct{})
		first := true
		pass := func() {
			passes.Add(1)
			if first {
				first = false
				<-release // a pass in flight, as adopt proposing ensure_prefix
			}
		}
		done := make(chan struct{})
		go func() { r.do(pass); close(done) }()
		synctest.Wait() // the first pass runs, blocked
		r.do(pass)      // a placement arrives: returns at once
		if n := passes.Load(); n != 1 {
			t.Fatalf("%d passes while the first runs, want 1", n)
		}
		close(release)
		<-done
		if n := passes.Load(); n != 2 {
			t.Fatalf("%d passes, want 2: the call during the first pass was lost", n)
		}
		r.do(pass)
		if n := passes.Load(); n != 3 {
			t.Fatalf("%d passes after a call at rest, want 3", n)
		}
	})
}
