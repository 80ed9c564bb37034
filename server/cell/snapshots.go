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
	recent      []api.SnapshotResponse // the last few saves, oldest first
	restores    uint64
	restoreTook time.Duration
	restoreAt   uint64 // the index of the restored snapshot
	restoreSHA  string // and the digest of its state-machine bytes
}

func (s *snapshotStats) saved(index uint64, bytes int64, sha string, took, stall time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves++
	s.recent = append(s.recent, api.SnapshotResponse{Index: index, Bytes: bytes, SHA256: sha, SaveMS: float64(took.Microseconds()) / 1000,
		FreezeMS: float64(stall.Microseconds()) / 1000})
	if len(s.recent) > 8 {
		s.recent = s.recent[1:]
	}
}

// find is the recorded save at index (automatic and requested saves may
// finish close together).
func (s *snapshotStats) find(index uint64) (api.SnapshotResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.recent) - 1; i >= 0; i-- {
		if s.recent[i].Index == index {
			return s.recent[i], true
		}
	}
	return api.SnapshotResponse{}, false
}

func (s *snapshotStats) latest() (api.SnapshotResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latestLocked()
}

func (s *snapshotStats) latestLocked() (api.SnapshotResponse, bool) {
	if len(s.recent) == 0 {
		return api.SnapshotResponse{}, false
	}
	return s.recent[len(s.recent)-1], true
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
	last, _ := s.latestLocked()
	return SnapshotCounters{Saves: s.saves, Restores: s.restores, LastBytes: last.Bytes,
		LastSave: time.Duration(last.SaveMS * float64(time.Millisecond)), LastRestore: s.restoreTook}
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
	for attempt := 0; ; attempt++ {
		index, err := c.nh.SyncRequestSnapshot(ctx, c.cfg.Info.ShardID, opt)
		if err == nil {
			if r, ok := c.snapshots.find(index); ok {
				r.Cell, r.ReplicaID = c.cfg.Info.Name, c.cfg.ReplicaID
				return r, nil
			}
			return api.SnapshotResponse{}, api.Errorf(api.CodeInternal, "snapshot at %d done, but no save at that index was recorded", index)
		}
		if !errors.Is(err, dragonboat.ErrRejected) {
			return api.SnapshotResponse{}, raftError(err)
		}
		// Rejected: nothing was applied since the last snapshot (not for
		// exports), which is then current; or one snapshot at a time per
		// replica, and an automatic one is being saved: wait, ask again.
		if last, ok := c.snapshots.latest(); ok && !opt.Exported && last.Index >= c.appliedIndex() {
			last.Cell, last.ReplicaID = c.cfg.Info.Name, c.cfg.ReplicaID
			return last, nil
		}
		if attempt >= 50 || sleepCtx(ctx, 100*time.Millisecond) != nil {
			if last, ok := c.snapshots.latest(); ok && !opt.Exported {
				last.Cell, last.ReplicaID = c.cfg.Info.Name, c.cfg.ReplicaID
				return last, nil
			}
			return api.SnapshotResponse{}, api.Errorf(api.CodeUnavailable, "cell %s: another snapshot is being saved; retry", c.cfg.Info.Name)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appliedIndex is this replica's applied index (0 if unreadable).
func (c *Cell) appliedIndex() uint64 {
	s, err := readLocal(c, statsOf)
	if err != nil {
		return 0
	}
	return s.index
}
