package api

// The directory and the admin routes: cells, prefixes, migrations,
// membership, restores, snapshots and backups.

// CellInfo describes a cell in the directory.
type CellInfo struct {
	Name     string   `json:"name"`
	ShardID  uint64   `json:"shard_id"`
	Prefixes []string `json:"prefixes"` // the prefixes it serves (PrefixInfo.Cell), sorted
	// Endpoints are the API addresses of the cell's replicas.
	Endpoints []string      `json:"endpoints"`
	Replicas  []ReplicaInfo `json:"replicas,omitempty"`
	// RestoreIndex is the backup index of the cell's latest restore plan
	// (0: never restored).
	RestoreIndex uint64 `json:"restore_index,omitempty"`
	// Restores counts the cell's restore plans: the n-th restored cell's
	// leader epochs start at n × LeaderEpochsPerRestore.
	Restores uint64 `json:"restores,omitempty"`
	// Timing is the cell's own timing (nil: the lockds' defaults).
	Timing *CellTiming `json:"timing,omitempty"`
}

// ReplicaInfo is one replica of a cell (or of the directory group).
type ReplicaInfo struct {
	ReplicaID uint64 `json:"replica_id"` // the replica's id in its Raft group; never reused
	Lockd     uint64 `json:"lockd"`      // the lockd process hosting it
	APIAddr   string `json:"api_addr"`
	Zone      string `json:"zone,omitempty"`
	// Learner: a non-voting replica catching up (member add --learner).
	Learner bool `json:"learner,omitempty"`
	// Initial: one of the members the cell was created with (started with
	// the full member list; a later member joins instead).
	Initial bool `json:"initial,omitempty"`
	// Pending is a membership change of this replica in flight (add,
	// promote or remove): recorded in the directory, not yet confirmed by
	// the cell's Raft group.
	Pending string `json:"pending,omitempty"`
	// JoinedLearner: it was added as a learner. Its replica always starts
	// non-voting (its log begins with its add as one); a promotion later
	// in the log makes it a voter.
	JoinedLearner bool `json:"joined_learner,omitempty"`
	// Restored: a replica of a cell being rebuilt from a backup (lockctl
	// restore). Its lockd starts it only once lockd restore has imported
	// the backup into it: started empty, it could elect an empty cell.
	Restored bool `json:"restored,omitempty"`
}

// PrefixInfo is one top-level prefix: the cell serving it and its
// directory epoch, the high bits of every fencing token issued under it.
type PrefixInfo struct {
	Prefix string `json:"prefix"`
	Cell   string `json:"cell"`
	Epoch  uint64 `json:"epoch"`
	// Migration is set while the prefix moves between cells.
	Migration *Migration `json:"migration,omitempty"`
}

// Migration phases, in order. A migration begins (the old cell will seal
// the prefix), then either commits (the directory names the new cell with
// the epoch + 1; from then only forward) or aborts (the old cell unseals).
const (
	MigrationSealing   = "sealing"   // begun: the old cell seals, the new cell stages the nodes
	MigrationCommitted = "committed" // the new cell serves (Cell is the new cell); the old one drops its copy
	MigrationAborting  = "aborting"  // abandoned before commit: the old cell unseals, the new one drops its staged copy
)

// Migration is a prefix move in flight.
type Migration struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Phase string `json:"phase"`
	// BeganAt is the directory index of the begin: it names this
	// migration, and every later step must carry it (a step of an earlier,
	// abandoned migration of the prefix is refused).
	BeganAt uint64 `json:"began_at"`
	// BeganAtMS is the wall clock (Unix ms) of the lockd that proposed
	// the begin, as the entry carries it: how long the move has been in
	// flight (0: begun by a lockd before it).
	BeganAtMS int64 `json:"began_at_ms,omitempty"`
	// SealIndex is the old cell's log index of the seal, once recorded.
	SealIndex uint64 `json:"seal_index,omitempty"`
	// Driver is the random name of the one client driving the migration
	// (MigrateRequest.Driver); Gen is the directory index at which it
	// began driving (the begin, or its take-over). Gen names the driver's
	// copy on the new cell, which refuses pages of an older one.
	Driver string `json:"driver,omitempty"`
	Gen    uint64 `json:"gen,omitempty"`
	// SealNodes and SealDigest describe the sealed source, as the old
	// cell computed them at the seal: a commit whose copy differs is
	// refused (copy_mismatch).
	SealNodes  int    `json:"seal_nodes,omitempty"`
	SealDigest string `json:"seal_digest,omitempty"`
}

// LockdInfo is one lockd process known to the directory.
type LockdInfo struct {
	ID       uint64 `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
	Zone     string `json:"zone,omitempty"`
	// LogCodec is the highest cell log codec this lockd decodes (0: JSON
	// only, as every build before the binary codec, which sends none).
	LogCodec uint8 `json:"log_codec,omitempty"`
}

// DirectoryResponse is the directory: prefix → cell, cell → replicas, and
// the lockds. Index is the directory group's log index it was read at (a
// later read never has a lower one).
type DirectoryResponse struct {
	Index     uint64       `json:"index"`
	Cells     []CellInfo   `json:"cells"`
	Prefixes  []PrefixInfo `json:"prefixes"`
	Lockds    []LockdInfo  `json:"lockds,omitempty"`
	Directory CellInfo     `json:"directory"` // the directory group's own replicas
	// Proxies are the registered lockproxies: clients send through them
	// by default.
	Proxies []ProxyInfo `json:"proxies,omitempty"`
	// Tenants, with their token digests: only to an admin (and within the
	// lockds); everyone else gets the directory without them.
	Tenants []Tenant `json:"tenants,omitempty"`
	// LogCodec is the cluster's log codec floor: every registered lockd
	// decodes it, a lockd that does not is refused registration
	// (codec_too_old), and cells write their logs in it. It only rises.
	LogCodec uint8 `json:"log_codec,omitempty"`
}

// Prefix returns a prefix's entry.
func (d DirectoryResponse) Prefix(p string) (PrefixInfo, bool) {
	for _, pi := range d.Prefixes {
		if pi.Prefix == p {
			return pi, true
		}
	}
	return PrefixInfo{}, false
}

// CreateCellRequest asks the directory for a new cell: placed on Replicas
// lockds (5, or 3) chosen by the placement rules, or on exactly the lockds
// in On.
type CreateCellRequest struct {
	Name     string   `json:"name"`
	Replicas int      `json:"replicas,omitempty"`
	On       []uint64 `json:"on,omitempty"`
	// Timing, if set, is the cell's own timing (a cell across regions).
	Timing *CellTiming `json:"timing,omitempty"`
}

// RestoreCellRequest plans the rebuild of a cell from its backup at
// BackupIndex, on new replicas: on exactly the lockds in On, or as many
// as it has voters, placed by the placement rules. The directory gives
// the cell those replicas (fresh replica ids, marked Restored) and raises
// the epoch of each of its prefixes, so that every token the restored
// cell issues compares above every token the lost one did, including
// those issued after the backup. Each planned lockd then imports the
// backup with lockd restore.
type RestoreCellRequest struct {
	Cell        string   `json:"cell"`
	BackupIndex uint64   `json:"backup_index"`
	On          []uint64 `json:"on,omitempty"`
}

// RestorePlan is everything lockd restore needs to import a cell's backup
// on one of its planned lockds: lockctl restore prints it (-o json), and
// lockd restore reads it from the directory or from a file.
type RestorePlan struct {
	Cell        string `json:"cell"`
	ShardID     uint64 `json:"shard_id"`
	BackupIndex uint64 `json:"backup_index"`
	// Replicas are the restored cell's members, with their Raft addresses.
	Replicas []RestoreReplica `json:"replicas"`
	// Epochs are the cell's prefixes at their raised epochs: the restored
	// cell commits them before it serves anything. They are the whole set
	// it serves: a prefix of the backup not among them (it moved away
	// since) is dropped from the restored state before anything is served.
	Epochs map[string]uint64 `json:"epochs"`
	// LeaderEpochFloor is the leader epoch the restored cell's first
	// leader starts at (at least): above every epoch the cell had before
	// the restore (Restores × LeaderEpochsPerRestore).
	LeaderEpochFloor uint64 `json:"leader_epoch_floor"`
	// Timing is the cell's own timing (nil: the lockds' defaults).
	Timing *CellTiming `json:"timing,omitempty"`
}

// RestoreReplica is one member of a restored cell.
type RestoreReplica struct {
	ReplicaID uint64 `json:"replica_id"`
	Lockd     uint64 `json:"lockd"`
	RaftAddr  string `json:"raft_addr"`
	APIAddr   string `json:"api_addr"`
}

// AssignPrefixRequest gives an unassigned prefix to a cell (a served
// prefix moves with a migration instead).
type AssignPrefixRequest struct {
	Prefix string `json:"prefix"`
	Cell   string `json:"cell"`
}

// RegisterLockdRequest records a lockd in the directory (each lockd sends
// its own on start; the same again changes nothing).
type RegisterLockdRequest struct {
	LockdInfo
}

// MigrateRequest drives one step of a prefix migration in the directory.
// Action: begin (To), seal_recorded (SealIndex), commit, abort, end.
type MigrateRequest struct {
	Prefix    string `json:"prefix"`
	Action    string `json:"action"`
	To        string `json:"to,omitempty"`
	SealIndex uint64 `json:"seal_index,omitempty"`
	// BeganAt names the migration a step belongs to (Migration.BeganAt);
	// every action but begin carries it.
	BeganAt uint64 `json:"began_at,omitempty"`
	// Driver names the client driving the migration (a random nonce of at
	// most MaxMigrationDriver bytes, the same on every step it sends).
	// A begin from another driver while one drives is refused
	// (migration_in_progress) unless TakeOver, which makes this driver the
	// one: the previous driver's next step is refused, and it stops.
	Driver   string `json:"driver,omitempty"`
	TakeOver bool   `json:"take_over,omitempty"`
	// Nodes and Digest: for sealed, the seal's count and digest of the
	// prefix's nodes; for commit, the new cell's over its staged copy.
	Nodes  int    `json:"nodes,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// Migration actions (MigrateRequest.Action).
const (
	MigrateBegin  = "begin"
	MigrateSealed = "sealed"
	MigrateCommit = "commit"
	MigrateAbort  = "abort"
	MigrateEnd    = "end"
)

// MemberRequest changes a cell's membership, one change at a time:
// Action add (a learner when Learner: it catches up without voting),
// promote (a learner to a voter), or remove, of the replica on Lockd.
// Sent to the cell's leader, which records the change in the directory,
// makes it in the cell's Raft group, and confirms it (done) or, if the
// group cannot commit it, takes it back (abort).
type MemberRequest struct {
	Cell    string `json:"cell"`
	Action  string `json:"action"`
	Lockd   uint64 `json:"lockd"`
	Learner bool   `json:"learner,omitempty"`
}

// Member actions (MemberRequest.Action); done and abort are the leader's
// own, in the directory.
const (
	MemberAdd     = "add"
	MemberPromote = "promote"
	MemberRemove  = "remove"
	MemberDone    = "done"
	MemberAbort   = "abort"
)

// PrefixOpRequest is a migration step on one cell (routed to its leader):
// seal (To), export (After, Limit), stage (Epoch, Nodes, First, Last),
// unseal, drop, or state.
type PrefixOpRequest struct {
	Cell   string `json:"cell"`
	Prefix string `json:"prefix"`
	Op     string `json:"op"`
	To     string `json:"to,omitempty"`
	// DirIndex: for seal, the directory index of the migration's begin;
	// for unseal, the index of a directory state that has no migration of
	// the prefix in flight (an unseal older than the seal is refused).
	DirIndex uint64 `json:"dir_index,omitempty"`
	// Epoch: for stage, the directory epoch the prefix will have here.
	Epoch uint64 `json:"epoch,omitempty"`
	// First: this stage page starts over (drops an earlier partial copy);
	// Last: it completes the copy.
	First bool           `json:"first,omitempty"`
	Last  bool           `json:"last,omitempty"`
	Nodes []ExportedNode `json:"nodes,omitempty"`
	// Gen and Page: for stage, the driver's generation (Migration.Gen)
	// and the page's number from 0. A cell refuses a page of a
	// generation older than its staged copy's (migration_in_progress), a
	// page it already has changes nothing, and a page past the next one
	// is refused.
	Gen   uint64 `json:"gen,omitempty"`
	Page  uint64 `json:"page,omitempty"`
	After string `json:"after,omitempty"` // export: nodes after this path
	Limit int    `json:"limit,omitempty"` // export: at most this many
}

// TransferRequest asks a cell's leader to hand leadership to its replica
// on lockd To.
type TransferRequest struct {
	Cell string `json:"cell"`
	To   uint64 `json:"to"`
}

// Prefix operations (PrefixOpRequest.Op).
const (
	PrefixSeal   = "seal"
	PrefixExport = "export"
	PrefixStage  = "stage"
	PrefixUnseal = "unseal"
	PrefixDrop   = "drop"
	PrefixState  = "state" // a linearizable read of the prefix's state on the cell

	// PrefixServing is PrefixOpResponse.State of a prefix the cell serves.
	PrefixServing = "serving"
)

// ExportedNode is a persistent node as a migration moves it: its value,
// data version and sequential-child counter are kept.
type ExportedNode struct {
	Path    string `json:"path"`
	Value   []byte `json:"value,omitempty"`
	Version uint64 `json:"version"`
	NextSeq uint64 `json:"next_seq,omitempty"`
	// Tenant owns the node (its quota counts it) on the new cell as it
	// did on the old; "" for none.
	Tenant string `json:"tenant,omitempty"`
	// DelayMS, on a lock directory: the lock-delay the new cell starts
	// on it when it begins serving the prefix. It covers a lock-delay in
	// force at the seal, and a lock held at the seal (whose holder may
	// act for up to its lease after: its lease plus its lock-delay).
	DelayMS int64 `json:"delay_ms,omitempty"`
	// Kept marks an entry without a node: the lock-delay (DelayMS) and
	// sequence counter (NextSeq) the old cell kept for a lock directory
	// deleted there during its delay (owned by Tenant); the new cell
	// keeps them on the path, the delay timed from its first serving
	// entry. Value and Version are empty.
	Kept bool `json:"kept,omitempty"`
	// Container: the node is a container (a lock recipe's directory,
	// deleted with its last child); the new cell keeps it one.
	Container bool `json:"container,omitempty"`
}

// PrefixOpResponse is a prefix operation's result: the cell's log index
// it applied at (or was read at), the prefix's state there, and for
// export a page of nodes (More: another page follows).
type PrefixOpResponse struct {
	Index uint64         `json:"index"`
	State string         `json:"state"` // serving, sealed, staged, or "" (absent)
	Epoch uint64         `json:"epoch,omitempty"`
	Nodes []ExportedNode `json:"nodes,omitempty"`
	More  bool           `json:"more,omitempty"`
	// Count and Digest: for seal, the sealed prefix's nodes; for the last
	// page of a stage, the staged copy's (a SHA-256 over the nodes in
	// path order as a migration moves them).
	Count  int    `json:"count,omitempty"`
	Digest string `json:"digest,omitempty"`
}

// SnapshotRequest asks the replica it is sent to (leader or not) to save a
// snapshot of a cell's state machine now.
type SnapshotRequest struct {
	Cell string `json:"cell"`
}

// SnapshotResponse describes the snapshot saved.
type SnapshotResponse struct {
	Cell      string  `json:"cell"`
	ReplicaID uint64  `json:"replica_id"`
	Index     uint64  `json:"index"`   // the last entry it covers
	Bytes     int64   `json:"bytes"`   // the state machine's part, before dragonboat's framing
	SHA256    string  `json:"sha256"`  // of those bytes: a restore reports the same digest
	SaveMS    float64 `json:"save_ms"` // writing it (encode and write to dragonboat's file), while applies go on
	// FreezeMS is how long applies waited for the snapshot: the
	// point-in-time copy taken before writing.
	FreezeMS float64 `json:"freeze_ms"`
}

// BackupRequest asks a cell's leader to export a snapshot to the backup
// store its lockd was configured with (--backup-dir).
type BackupRequest struct {
	Cell string `json:"cell"`
}

// BackupResponse describes the backup taken.
type BackupResponse struct {
	SnapshotResponse
	Location string `json:"location"` // where the store keeps it
}
