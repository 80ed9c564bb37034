package cell

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cachers"
	"github.com/lockservice/lockd/server/fsm"
)

// A change whose proposal failed without a verdict keeps its node
// uncacheable until a barrier proposed after it commits (or the
// leadership ends); a change applied or refused frees it at once (finding
// 5). mutant lockd_broken_cachesettle frees it at once in every case.
func TestUnknownOutcomeKeepsTheNodeUncacheable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestReplica(t, 1, nil)
		r.c.leaderID.Store(1)
		r.c.term.Store(1)
		r.apply(fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: 1, Term: 1})
		release := make(chan struct{})
		barriers := make(chan struct{}, 8)
		r.c.barrier = func(ctx context.Context, epoch uint64) error {
			barriers <- struct{}{}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		busy := func(path string) bool {
			o := r.c.cachers.Register(path, 99, "")
			r.c.cachers.Forget(99)
			return o == cachers.Busy
		}
		cases := []struct {
			name    string
			err     error
			settles bool // freed only by the barrier
		}{
			{"applied", nil, false},
			{"refused", &Refusal{api.Errorf(api.CodeVersionMismatch, "no")}, false},
			{"timed out", api.Errorf(api.CodeUnavailable, "timeout"), true},
			{"raft error", errors.New("dropped"), true},
		}
		for i, tc := range cases {
			path := "/demo/k" + string(rune('a'+i))
			_, end := r.c.cachers.Begin(path, time.Now())
			r.c.finish(func() { end(true) })(tc.err)
			if !tc.settles {
				if busy(path) {
					t.Fatalf("%s: the node stays uncacheable after a decided proposal", tc.name)
				}
				continue
			}
			waitBarrier(t, barriers)
			if !busy(path) {
				t.Fatalf("%s: the node is cacheable while the change's fate is unknown", tc.name)
			}
			release <- struct{}{}
			synctest.Wait()
			if busy(path) {
				t.Fatalf("%s: the node stays uncacheable after the barrier committed", tc.name)
			}
		}
		// Leadership lost: the next leader on this replica decides the entry
		// before it starts, so the node is freed without a barrier.
		_, end := r.c.cachers.Begin("/demo/lost", time.Now())
		r.c.finish(func() { end(true) })(errors.New("dropped"))
		waitBarrier(t, barriers)
		r.c.sessions.Stop()
		synctest.Wait()
		if busy("/demo/lost") {
			t.Fatal("the node stays uncacheable after the leadership ended")
		}
	})
}

// waitBarrier checks that a barrier is proposed; it runs in a synctest
// bubble, once every other goroutine of it is blocked.
func waitBarrier(t *testing.T, barriers <-chan struct{}) {
	t.Helper()
	synctest.Wait()
	select {
	case <-barriers:
	default:
		t.Fatal("no barrier proposed after a proposal with an unknown outcome")
	}
}
