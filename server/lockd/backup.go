package lockd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/tools"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/server/audit"
	"github.com/lockservice/lockd/server/backup"
	"github.com/lockservice/lockd/server/raftnet"
)

// nodeHostConfig is the NodeHost configuration of a lockd: Start runs it,
// and Restore must import into exactly the same one.
func nodeHostConfig(cfg Config) config.NodeHostConfig {
	logdb, _ := logDBConfig(cfg.LogDB)
	expert := config.GetDefaultExpertConfig()
	expert.LogDB = logdb
	// dragonboat's wire format; a sender that notices a peer's restart
	// before it writes (server/raftnet).
	expert.TransportFactory = raftnet.Factory{}
	raft := cfg.RaftTLSFiles()
	if mutant.On(mutant.RaftCA) {
		raft = cfg.TLSFiles()
	}
	return config.NodeHostConfig{
		DeploymentID:   cfg.DeploymentID,
		NodeHostDir:    filepath.Join(cfg.DataDir, "nodehost"),
		WALDir:         filepath.Join(cfg.DataDir, "wal"),
		RTTMillisecond: cfg.RTTMillisecond,
		RaftAddress:    cfg.Self().RaftAddr,
		ListenAddress:  cfg.RaftListen,
		Expert:         expert,
		// Replicas talk mutual TLS on the Raft CA: each presents its Raft
		// certificate and checks the other's against the Raft CA, which
		// signs no API client's certificate.
		MutualTLS: raft.Set(),
		CAFile:    raft.CA,
		CertFile:  raft.Cert,
		KeyFile:   raft.Key,
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
	sweepExports(scratch, time.Now(), exportSweepAge)
	tmp, err := os.MkdirTemp(scratch, cellName+"-")
	if err != nil {
		return api.BackupResponse{}, api.Errorf(api.CodeInternal, "backup: %v", err)
	}
	snap, dir, err := c.Export(ctx, tmp)
	if err != nil {
		// The request ended (its context, say) but dragonboat's snapshot
		// worker may still be writing into tmp: removing it under the
		// worker makes the save fail, and dragonboat panics on that (a
		// lockd lost to a slow backup). Left for a later sweep.
		return api.BackupResponse{}, err
	}
	defer os.RemoveAll(tmp) // the save is done: SyncRequestSnapshot returned it
	loc, err := p.store.Put(ctx, cellName, snap.Index, dir)
	if err != nil {
		return api.BackupResponse{}, api.Errorf(api.CodeInternal, "backup store: %v", err)
	}
	p.log.Info("cell backed up", "cell", cellName, "index", snap.Index, "bytes", snap.Bytes, "sha256", snap.SHA256, "location", loc)
	return api.BackupResponse{SnapshotResponse: snap, Location: loc}, nil
}

// backupRound backs up every cell this lockd leads (every
// --backup-every, run by p.every).
func (p *Process) backupRound() {
	for _, c := range p.allCells() {
		name := c.Info().Name
		if c.Ready() != nil {
			continue // only the leader backs a cell up
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		res, err := p.Backup(ctx, name)
		if err != nil {
			p.log.Warn("periodic backup failed", "cell", name, "err", err)
		}
		p.auditSelf(audit.ActBackup, err, audit.Target{Cell: name, Index: res.Index, Location: audit.Clip(res.Location)})
		cancel()
	}
}

// Restore imports a backup of cell into this lockd's data directory, as
// the cell's restore plan (lockctl restore) places it here: the replica
// id and the members come from the plan, and so does the backup's index
// (every replica must import the same one; index, if set, must agree).
// plan nil: read it from the directory (a directory replica's API). The
// lockd must be stopped; lockd serve then starts the replica from the
// backup, and its leader raises the cell's prefixes to the plan's epochs
// before it serves, drops those the plan does not list (the directory
// moved them away after the backup), and starts at the plan's leader
// epoch floor. Entries after the backup's index are lost.
func Restore(ctx context.Context, cfg Config, cellName string, store backup.Store, index uint64, plan *api.RestorePlan) (uint64, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	if plan == nil {
		p, err := fetchRestorePlan(cfg, cellName)
		if err != nil {
			return 0, fmt.Errorf("restore: %w", err)
		}
		plan = &p
	}
	mine, members, err := checkRestorePlan(cfg, cellName, plan, index)
	if err != nil {
		return 0, err
	}
	index = plan.BackupIndex
	have, err := store.List(ctx, cellName)
	if err != nil {
		return 0, fmt.Errorf("restore: %w", err)
	}
	snapDir, err := store.Fetch(ctx, cellName, index, filepath.Join(cfg.DataDir, "backup-import"))
	if errors.Is(err, backup.ErrNoBackup) {
		return 0, fmt.Errorf("restore: no backup of cell %q at index %d (the store has %v)", cellName, index, have)
	}
	if err != nil {
		return 0, fmt.Errorf("restore: %w", err)
	}
	quietDragonboat()
	if err := tools.ImportSnapshot(nodeHostConfig(cfg), snapDir, members, mine.ReplicaID); err != nil {
		return 0, fmt.Errorf("restore: import of %s: %w", snapDir, err)
	}
	if err := recordRestoredReplica(cfg.DataDir, plan, mine.ReplicaID); err != nil {
		return 0, fmt.Errorf("restore: %w", err)
	}
	return index, nil
}

// checkRestorePlan checks that plan restores cellName, with a leader epoch
// floor, places a replica on this lockd at its Raft address, and restores
// the backup at index (if set). It returns this lockd's replica and the
// members (replica id to Raft address).
func checkRestorePlan(cfg Config, cellName string, plan *api.RestorePlan, index uint64) (*api.RestoreReplica, map[uint64]string, error) {
	if plan.Cell != cellName {
		return nil, nil, fmt.Errorf("restore: the plan is for cell %q, not %q", plan.Cell, cellName)
	}
	if plan.LeaderEpochFloor == 0 {
		// Without it the restored cell would reuse leader epochs clients
		// saw before the restore (and keep every prefix of the backup).
		return nil, nil, fmt.Errorf("restore: the plan of cell %s has no leader epoch floor (it was made by an older lockctl or directory): plan the restore again with lockctl restore %s --index %d", cellName, cellName, plan.BackupIndex)
	}
	var mine *api.RestoreReplica
	members := map[uint64]string{}
	var on []uint64
	for i, r := range plan.Replicas {
		members[r.ReplicaID] = r.RaftAddr
		on = append(on, r.Lockd)
		if r.Lockd == cfg.ReplicaID {
			mine = &plan.Replicas[i]
		}
	}
	if mine == nil {
		return nil, nil, fmt.Errorf("restore: the restore plan of cell %s places no replica on lockd %d (it places them on lockds %v)", cellName, cfg.ReplicaID, on)
	}
	if self := cfg.Self().RaftAddr; mine.RaftAddr != self {
		return nil, nil, fmt.Errorf("restore: the plan gives lockd %d the Raft address %s, but it serves on %s", cfg.ReplicaID, mine.RaftAddr, self)
	}
	if index != 0 && index != plan.BackupIndex {
		return nil, nil, fmt.Errorf("restore: the plan restores the backup at index %d, not %d (every replica imports the same one)", plan.BackupIndex, index)
	}
	return mine, members, nil
}

// recordRestoredReplica records the imported replica in dataDir, in place
// of any earlier one of the plan's cell: lockd serve starts it from this
// record, with the floors, before it reads the directory.
func recordRestoredReplica(dataDir string, plan *api.RestorePlan, replicaID uint64) error {
	reps, err := readReplicas(dataDir)
	if err != nil {
		return err
	}
	kept := reps[:0]
	for _, r := range reps {
		if r.Cell != plan.Cell {
			kept = append(kept, r)
		}
	}
	kept = append(kept, hostedReplica{Cell: plan.Cell, ShardID: plan.ShardID, ReplicaID: replicaID, EpochFloors: plan.Epochs, LeaderEpochFloor: plan.LeaderEpochFloor, Timing: plan.Timing})
	return writeReplicas(dataDir, kept)
}

// The directory group may be electing when a restore reads its plan: the
// procedure restarts the lockds one after another, several of them
// directory members. fetchRestorePlan asks every member, up to
// restorePlanRounds times, restorePlanPause apart (about 10 s in all).
const (
	restorePlanRounds = 20
	restorePlanPause  = 500 * time.Millisecond
)

// fetchRestorePlan reads a cell's restore plan from the directory, through
// the API of one of its replicas, retrying while none answers.
func fetchRestorePlan(cfg Config, cellName string) (api.RestorePlan, error) {
	pc, err := newPeerClient(cfg, "lockd-restore")
	if err != nil {
		return api.RestorePlan{}, err
	}
	var errs []error
	for round := 0; round < restorePlanRounds; round++ {
		if round > 0 {
			time.Sleep(restorePlanPause)
		}
		var plan api.RestorePlan
		var answered bool
		plan, answered, errs, err = restorePlanRound(cfg, pc, cellName)
		if answered {
			return plan, err
		}
	}
	return api.RestorePlan{}, fmt.Errorf("no directory replica answered in %d rounds (give the plan with --plan, as lockctl restore -o json printed it): %w", restorePlanRounds, errors.Join(errs...))
}

// restorePlanRound asks each directory member once; answered is false (with
// each member's error) if none did.
func restorePlanRound(cfg Config, pc peerClient, cellName string) (plan api.RestorePlan, answered bool, errs []error, err error) {
	for _, peer := range cfg.Peers {
		var dir api.DirectoryResponse
		err := callPeer(pc, peerTimeout, peer.APIAddr, "GET", api.RouteDirectory, nil, &dir)
		if err == nil && dir.Index == 0 {
			err = fmt.Errorf("its directory is not bootstrapped")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", peer.APIAddr, err))
			continue
		}
		view, err := directory.New(dir)
		if err != nil {
			return api.RestorePlan{}, true, nil, err
		}
		plan, err := view.RestorePlan(cellName)
		return plan, true, nil, err
	}
	return api.RestorePlan{}, false, errs, nil
}

// exportSweepAge: an export directory left by a failed backup (its save
// possibly still running then) is removed once this old, by a later
// backup.
const exportSweepAge = time.Hour

// sweepExports removes the entries of scratch last modified before
// now-age (bounded by the directory's listing: one per failed backup).
func sweepExports(scratch string, now time.Time, age time.Duration) {
	entries, err := os.ReadDir(scratch)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && now.Sub(info.ModTime()) > age {
			os.RemoveAll(filepath.Join(scratch, e.Name()))
		}
	}
}
