package lockd

import (
	"sync"
	"time"

	"github.com/lni/dragonboat/v4/raftio"

	"github.com/lockservice/lockd/internal/mutant"
)

// unloadTimeout bounds the wait for a stopped replica to unload.
const unloadTimeout = 10 * time.Second

// unloads learns from dragonboat when a stopped replica is fully unloaded.
// StopReplica returns before dragonboat's engine workers have let go of
// the replica, and starting the shard's next incarnation on the NodeHost
// before they have panics the engine ("from two incarnations found"): a
// replica removed and added again on one lockd must wait for the unload.
type unloads struct {
	mu      sync.Mutex
	waiting map[raftio.NodeInfo]chan struct{}
	// unloading are the shards whose replica here was stopped and may not
	// have unloaded yet: the shard's next start waits for it (before).
	unloading map[uint64]<-chan struct{}
}

func newUnloads() *unloads {
	return &unloads{waiting: map[raftio.NodeInfo]chan struct{}{}, unloading: map[uint64]<-chan struct{}{}}
}

// expect returns a channel closed once the replica has unloaded. Call it
// before stopping the replica.
func (u *unloads) expect(shardID, replicaID uint64) <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := raftio.NodeInfo{ShardID: shardID, ReplicaID: replicaID}
	ch, ok := u.waiting[k]
	if !ok {
		ch = make(chan struct{})
		u.waiting[k] = ch
	}
	return ch
}

// forget drops an expectation nobody will wait for.
func (u *unloads) forget(shardID, replicaID uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.waiting, raftio.NodeInfo{ShardID: shardID, ReplicaID: replicaID})
}

// stopped records the stop of a shard's replica, unloaded being what
// expect returned before it: if StopReplica took the replica (took), the
// shard's next start here waits for its unload (before); if not, nothing
// will unload, and the expectation is dropped.
func (u *unloads) stopped(shardID, replicaID uint64, unloaded <-chan struct{}, took bool) {
	if !took || mutant.On(mutant.SkipsUnloadWait) {
		u.forget(shardID, replicaID)
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.unloading[shardID] = unloaded
}

// before waits, before a replica of shardID starts here, until the
// shard's replica stopped here last has unloaded, or timeout has passed
// (false). A shard with no replica stopped here returns at once.
func (u *unloads) before(shardID uint64, timeout time.Duration) bool {
	u.mu.Lock()
	unloaded, ok := u.unloading[shardID]
	delete(u.unloading, shardID)
	u.mu.Unlock()
	if !ok {
		return true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-unloaded:
		return true
	case <-t.C:
		return false
	}
}

// NodeUnloaded is dragonboat's system event.
func (u *unloads) NodeUnloaded(info raftio.NodeInfo) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if ch, ok := u.waiting[info]; ok {
		close(ch)
		delete(u.waiting, info)
	}
}

// The other system events are not used.
func (u *unloads) NodeHostShuttingDown()                       {}
func (u *unloads) NodeDeleted(raftio.NodeInfo)                 {}
func (u *unloads) NodeReady(raftio.NodeInfo)                   {}
func (u *unloads) MembershipChanged(raftio.NodeInfo)           {}
func (u *unloads) ConnectionEstablished(raftio.ConnectionInfo) {}
func (u *unloads) ConnectionFailed(raftio.ConnectionInfo)      {}
func (u *unloads) SendSnapshotStarted(raftio.SnapshotInfo)     {}
func (u *unloads) SendSnapshotCompleted(raftio.SnapshotInfo)   {}
func (u *unloads) SendSnapshotAborted(raftio.SnapshotInfo)     {}
func (u *unloads) SnapshotReceived(raftio.SnapshotInfo)        {}
func (u *unloads) SnapshotRecovered(raftio.SnapshotInfo)       {}
func (u *unloads) SnapshotCreated(raftio.SnapshotInfo)         {}
func (u *unloads) SnapshotCompacted(raftio.SnapshotInfo)       {}
func (u *unloads) LogCompacted(raftio.EntryInfo)               {}
func (u *unloads) LogDBCompacted(raftio.EntryInfo)             {}
