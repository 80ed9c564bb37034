package lockd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/tools"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/backup"
)

// nodeHostConfig is the NodeHost configuration of a lockd: Start runs it,
// and Restore must import into exactly the same one.
func nodeHostConfig(cfg Config) config.NodeHostConfig {
	logdb, _ := logDBConfig(cfg.LogDB)
	expert := config.GetDefaultExpertConfig()
	expert.LogDB = logdb
	return config.NodeHostConfig{
		DeploymentID:   cfg.DeploymentID,
		NodeHostDir:    filepath.Join(cfg.DataDir, "nodehost"),
		WALDir:         filepath.Join(cfg.DataDir, "wal"),
		RTTMillisecond: cfg.RTTMillisecond,
		RaftAddress:    cfg.Self().RaftAddr,
		Expert:         expert,
	}
}

// Backup exports a snapshot of the named cell, which this lockd must lead,
// to the backup store.
func (p *Process) Backup(ctx context.Context, cellName string) (api.BackupResponse, error) {
	c, ok := p.Cell(cellName)
	if !ok {
		return api.BackupResponse{}, api.Errorf(api.CodeWrongCell, "cell %q is not hosted by this lockd", cellName)
	}
	if p.store == nil {
		return api.BackupResponse{}, api.Errorf(api.CodeBadRequest, "this lockd has no backup store: start it with --backup-dir")
	}
	// One export at a time: dragonboat saves one snapshot per replica at a
	// time, and the periodic loop and lockctl backup may meet.
	p.backupMu.Lock()
	defer p.backupMu.Unlock()
	scratch := filepath.Join(p.cfg.DataDir, "backup-export")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return api.BackupResponse{}, api.Errorf(api.CodeInternal, "backup: %v", err)
	}
	tmp, err := os.MkdirTemp(scratch, cellName+"-")
	if err != nil {
		return api.BackupResponse{}, api.Errorf(api.CodeInternal, "backup: %v", err)
	}
	defer os.RemoveAll(tmp)
	snap, dir, err := c.Export(ctx, tmp)
	if err != nil {
		return api.BackupResponse{}, err
	}
	loc, err := p.store.Put(ctx, cellName, snap.Index, dir)
	if err != nil {
		return api.BackupResponse{}, api.Errorf(api.CodeInternal, "backup store: %v", err)
	}
	p.log.Info("cell backed up", "cell", cellName, "index", snap.Index, "bytes", snap.Bytes, "sha256", snap.SHA256, "location", loc)
	return api.BackupResponse{SnapshotResponse: snap, Location: loc}, nil
}

// backupLoop backs up every cell this lockd leads, every interval.
func (p *Process) backupLoop(every time.Duration) {
	defer p.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		for _, c := range p.allCells() {
			name := c.Info().Name
			if c.Ready() != nil {
				continue // only the leader backs a cell up
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			if _, err := p.Backup(ctx, name); err != nil {
				p.log.Warn("periodic backup failed", "cell", name, "err", err)
			}
			cancel()
		}
	}
}

// Restore rebuilds this lockd's replica of cell from the backup store at
// index (0: the newest backup), for disaster recovery. The lockd must be
// stopped; every replica of the cell is restored from the same backup with
// the same peers, and then started as usual. Entries after the backup's
// index are lost: the cell's state becomes the backup's. cfg is the
// lockd's own configuration (the flags of lockd serve).
func Restore(ctx context.Context, cfg Config, cellName string, store backup.Store, index uint64) (uint64, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	found := false
	for _, cc := range cfg.Cells {
		found = found || cc.Name == cellName
	}
	if !found {
		return 0, fmt.Errorf("restore: cell %q is not one of this lockd's cells (--cell)", cellName)
	}
	have, err := store.List(ctx, cellName)
	if err != nil {
		return 0, fmt.Errorf("restore: %w", err)
	}
	if len(have) == 0 {
		return 0, fmt.Errorf("restore: no backup of cell %q in the store", cellName)
	}
	if index == 0 {
		index = have[len(have)-1]
	}
	snapDir, err := store.Fetch(ctx, cellName, index, filepath.Join(cfg.DataDir, "backup-import"))
	if errors.Is(err, backup.ErrNoBackup) {
		return 0, fmt.Errorf("restore: no backup of cell %q at index %d (the store has %v)", cellName, index, have)
	}
	if err != nil {
		return 0, fmt.Errorf("restore: %w", err)
	}
	members := map[uint64]string{}
	for _, peer := range cfg.Peers {
		members[peer.ID] = peer.RaftAddr
	}
	quietDragonboat()
	if err := tools.ImportSnapshot(nodeHostConfig(cfg), snapDir, members, cfg.ReplicaID); err != nil {
		return 0, fmt.Errorf("restore: import of %s: %w", snapDir, err)
	}
	return index, nil
}
