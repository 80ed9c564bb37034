package lockd

import (
	"testing"
	"testing/synctest"

	"github.com/lni/dragonboat/v4/raftio"
)

// A replica removed from its cell and added again on the same lockd (a new
// replica id, the same shard) starts only once dragonboat has unloaded the
// stopped one: StopReplica returns before the engine's workers let go of
// it, and a worker that then finds the shard's next incarnation panics
// the engine ("from two incarnations found"). On a real NodeHost the race
// needs a worker still busy with the stopped replica when the next one
// starts: StopReplica wakes every worker, and they let go far sooner than
// the next replica's start takes, so TestReAddReplicaOnSameLockd does not
// meet it; here the unload event is held back instead. mutant
// lockd_broken_unload starts the next replica at once.
func TestNextReplicaWaitsForTheUnload(t *testing.T) {
	const shard, old = 7, 3
	cases := []struct {
		name string
		took bool // StopReplica took the replica
		// unloadedFirst: the unload event came before the stop returned.
		unloadedFirst bool
		// neverUnloaded: no unload event comes; the wait ends at the timeout.
		neverUnloaded bool
		held          bool // the next start waits for the event
	}{
		{"stopped: the next start waits for the unload", true, false, false, true},
		{"unloaded before the stop returned: no wait", true, true, false, false},
		{"StopReplica found no replica: no wait", false, false, false, false},
		{"no unload event: the wait ends at the timeout", true, false, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				u := newUnloads()
				unloaded := u.expect(shard, old)
				if tc.unloadedFirst {
					u.NodeUnloaded(raftio.NodeInfo{ShardID: shard, ReplicaID: old})
				}
				u.stopped(shard, old, unloaded, tc.took)
				done := make(chan bool, 1)
				go func() { done <- u.before(shard, unloadTimeout) }()
				synctest.Wait()
				select {
				case <-done:
					if tc.held {
						t.Fatal("the shard's next replica may start before the stopped one unloaded")
					}
					return
				default:
					if !tc.held {
						t.Fatal("the shard's next replica waits for an unload that has come or will not come")
					}
				}
				if !tc.neverUnloaded {
					u.NodeUnloaded(raftio.NodeInfo{ShardID: shard, ReplicaID: old + 1}) // another incarnation's: not this one
					synctest.Wait()
					select {
					case <-done:
						t.Fatal("the wait ended on another replica's unload")
					default:
					}
					u.NodeUnloaded(raftio.NodeInfo{ShardID: shard, ReplicaID: old})
				}
				synctest.Wait()
				if ok := <-done; ok == tc.neverUnloaded {
					t.Fatalf("wait ended reporting unloaded %v, want %v", ok, !tc.neverUnloaded)
				}
				if !u.before(shard, unloadTimeout) {
					t.Fatal("a second start waits again")
				}
			})
		})
	}
}
