package lockd

import (
	"sync"
	"time"

	"github.com/lni/dragonboat/v4/raftio"
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
}

func newUnloads() *unloads { return &unloads{waiting: map[raftio.NodeInfo]chan struct{}{}} }

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
