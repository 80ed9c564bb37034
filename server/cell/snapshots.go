package cell

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/lockservice/lockd/api"
)

// snapshotStats records this replica's latest snapshot save and restore,
// for the metrics and the admin snapshot request.
type snapshotStats struct {
	mu          sync.Mutex
	saves       uint64
	last        api.SnapshotResponse // the latest save
	restores    uint64
	restoreTook time.Duration
	restoreAt   uint64 // the index of the restored snapshot
	restoreSHA  string // and the digest of its state-machine bytes
}

func (s *snapshotStats) saved(index uint64, bytes int64, sha string, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves++
	s.last = api.SnapshotResponse{Index: index, Bytes: bytes, SHA256: sha, SaveMS: float64(took.Microseconds()) / 1000}
}

func (s *snapshotStats) restored(index uint64, sha string, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restores++
	s.restoreTook, s.restoreAt, s.restoreSHA = took, index, sha
}

// Restored is the index and digest of the snapshot this replica last
// restored (0, "" if none): a restore from backup is checked against the
// backup's digest with it.
func (c *Cell) Restored() (index uint64, sha string) {
	c.snapshots.mu.Lock()
	defer c.snapshots.mu.Unlock()
	return c.snapshots.restoreAt, c.snapshots.restoreSHA
}

// SnapshotCounters are the snapshot metrics of one replica.
type SnapshotCounters struct {
	Saves, Restores       uint64
	LastBytes             int64
	LastSave, LastRestore time.Duration
}

// SnapshotCounters reads them.
func (c *Cell) SnapshotCounters() SnapshotCounters {
	s := &c.snapshots
	s.mu.Lock()
	defer s.mu.Unlock()
	return SnapshotCounters{Saves: s.saves, Restores: s.restores, LastBytes: s.last.Bytes,
		LastSave: time.Duration(s.last.SaveMS * float64(time.Millisecond)), LastRestore: s.restoreTook}
}

// Snapshot makes this replica save a snapshot of its state machine now (it
// need not lead: every replica snapshots its own state) and reports its
// index, size and how long the save took. An operator's tool, and the
// measure of lockbench's state scenario.
func (c *Cell) Snapshot(ctx context.Context) (api.SnapshotResponse, error) {
	return c.snapshot(ctx, dragonboat.SnapshotOption{})
}

// Export saves a snapshot of the state machine now into a directory of its
// own under dir (dragonboat's exported format, which ImportSnapshot
// restores) and returns it with the snapshot's description. Any replica
// can export; the leader's is the most recent.
func (c *Cell) Export(ctx context.Context, dir string) (api.SnapshotResponse, string, error) {
	r, err := c.snapshot(ctx, dragonboat.SnapshotOption{Exported: true, ExportPath: dir})
	if err != nil {
		return r, "", err
	}
	return r, filepath.Join(dir, fmt.Sprintf("snapshot-%016X", r.Index)), nil
}

func (c *Cell) snapshot(ctx context.Context, opt dragonboat.SnapshotOption) (api.SnapshotResponse, error) {
	index, err := c.nh.SyncRequestSnapshot(ctx, c.cfg.Info.ShardID, opt)
	if err != nil {
		if errors.Is(err, dragonboat.ErrRejected) && opt.Exported {
			// One snapshot at a time per replica: an automatic one is
			// being saved. The caller retries.
			return api.SnapshotResponse{}, api.Errorf(api.CodeUnavailable, "cell %s: another snapshot is being saved; retry", c.cfg.Info.Name)
		}
		if errors.Is(err, dragonboat.ErrRejected) {
			// Nothing applied since the last snapshot: that one is current.
			c.snapshots.mu.Lock()
			last := c.snapshots.last
			c.snapshots.mu.Unlock()
			if last.Index != 0 {
				last.Cell, last.ReplicaID = c.cfg.Info.Name, c.cfg.ReplicaID
				return last, nil
			}
		}
		return api.SnapshotResponse{}, raftError(err)
	}
	c.snapshots.mu.Lock()
	last := c.snapshots.last
	c.snapshots.mu.Unlock()
	if last.Index != index {
		return api.SnapshotResponse{}, api.Errorf(api.CodeInternal, "snapshot at %d done, but the latest save recorded is at %d", index, last.Index)
	}
	last.Cell, last.ReplicaID = c.cfg.Info.Name, c.cfg.ReplicaID
	return last, nil
}
