package api

// Replica, lockd and cluster status.

// ReplicaStatus is one replica's view of one cell.
type ReplicaStatus struct {
	Cell      string `json:"cell"`
	ShardID   uint64 `json:"shard_id"`
	ReplicaID uint64 `json:"replica_id"`
	Role      string `json:"role"` // leader, follower, unknown
	// Timing is the cell's own timing this replica runs on (nil: the
	// lockd's defaults).
	Timing       *CellTiming `json:"timing,omitempty"`
	LeaderID     uint64      `json:"leader_id"`
	LeaderAPI    string      `json:"leader_api,omitempty"`
	Term         uint64      `json:"term"`
	AppliedIndex uint64      `json:"applied_index"`
	Epoch        uint64      `json:"epoch"` // leader epoch in this replica's state
	Sessions     int         `json:"sessions"`
	Nodes        int         `json:"nodes"`
	// LogCodec is the log codec the cell's state says its entries are
	// written in (0: JSON; raised by a set_codec entry once the
	// directory's floor allows).
	LogCodec uint8 `json:"log_codec"`
	// UngatedEntries counts entries this replica applied written in a
	// codec above its cell's: always 0 unless a proposer broke the gate
	// (a replica of an older build would have refused them).
	UngatedEntries uint64 `json:"ungated_entries,omitempty"`
	// TokenHeadroom is how many more Raft entries the cell can apply before
	// it refuses lock creates (token_exhausted: the fencing token's index
	// bits are used up; move the prefix to a new cell before).
	TokenHeadroom uint64 `json:"token_index_headroom"`
	// RestoredIndex and RestoredSHA256 describe the snapshot this replica
	// last loaded (at start, from the leader, or from a backup import):
	// a restore is verified by comparing them with the backup's.
	RestoredIndex  uint64 `json:"restored_index,omitempty"`
	RestoredSHA256 string `json:"restored_sha256,omitempty"`
	// The leader's soft state, for the health assessment (zero on a
	// follower): its commit p99 over its recent commits, how long the
	// oldest change waiting on cache acknowledgements has waited, and the
	// sessions it expired in the last minute.
	CommitP99MS          float64 `json:"commit_p99_ms,omitempty"`
	OldestInvalidationMS int64   `json:"oldest_invalidation_ms,omitempty"`
	ExpiriesLastMinute   int     `json:"expiries_last_minute,omitempty"`
	// CommitsLastMinute counts the commits CommitP99MS covers (at most
	// 1 024); CommitFailuresLastMinute the proposals that failed (timed
	// out, or lost the leadership) in the last minute.
	CommitsLastMinute        int `json:"commits_last_minute,omitempty"`
	CommitFailuresLastMinute int `json:"commit_failures_last_minute,omitempty"`
	// LeaderChanges are the latest leaders this replica saw elected,
	// newest first (at most MaxLeaderChanges).
	LeaderChanges []LeaderChange `json:"leader_changes,omitempty"`
	// Staged are the copies of moving prefixes this replica's state is
	// taking up, with the nodes staged so far.
	Staged []StagedCopy `json:"staged,omitempty"`
	// Usage is what each tenant holds on the cell (its quota is per cell).
	Usage []TenantUsage `json:"usage,omitempty"`
}

// MaxLeaderChanges bounds the leader changes a replica remembers.
const MaxLeaderChanges = 8

// StagedCopy is a moving prefix's copy on its new cell.
type StagedCopy struct {
	Prefix string `json:"prefix"`
	Nodes  int    `json:"nodes"`
}

// TenantUsage is what one tenant holds on one cell.
type TenantUsage struct {
	Tenant   string `json:"tenant"`
	Sessions int    `json:"sessions"`
	Nodes    int    `json:"nodes"`
	Bytes    int64  `json:"bytes"`
}

// StatusResponse is what one lockd process reports about itself.
type StatusResponse struct {
	// Version is the lockd build (`git describe`, or "dev").
	Version   string `json:"version"`
	ReplicaID uint64 `json:"replica_id"`
	APIAddr   string `json:"api_addr"`
	RaftAddr  string `json:"raft_addr"`
	Zone      string `json:"zone,omitempty"`
	// DirectoryReplica: this lockd hosts a replica of the directory group.
	DirectoryReplica bool `json:"directory_replica,omitempty"`
	// Stopping: this lockd is stopping (handing its leaderships off).
	Stopping bool `json:"stopping,omitempty"`
	// DirectoryLeader is the lockd leading the directory group, as this
	// directory replica knows it (0: unknown, or not a directory replica).
	DirectoryLeader uint64 `json:"directory_leader,omitempty"`
	// DirectoryIndex is the index of the directory this lockd routes by.
	DirectoryIndex uint64 `json:"directory_index"`
	// LogCodec is the highest cell log codec this lockd decodes and
	// advertises to the directory; LogCodecFloor the directory's floor
	// as this lockd's view has it.
	LogCodec      uint8           `json:"log_codec"`
	LogCodecFloor uint8           `json:"log_codec_floor"`
	Cells         []ReplicaStatus `json:"cells"`
	// FsyncP99MS is the p99 of this lockd's data-directory fsync probe
	// over its last minute (0: no probe yet); FsyncProbes how many probes
	// completed in that minute, FsyncSlowProbes how many of them took
	// longer than the spec's 10 ms warning, FsyncFailures how many failed;
	// FsyncProbeAgeMS how long since the last probe completed (a disk
	// that hangs stops the probe: -1, none yet).
	FsyncP99MS      float64 `json:"fsync_p99_ms,omitempty"`
	FsyncProbes     int     `json:"fsync_probes,omitempty"`
	FsyncSlowProbes int     `json:"fsync_slow_probes,omitempty"`
	FsyncFailures   int     `json:"fsync_failures,omitempty"`
	FsyncProbeAgeMS int64   `json:"fsync_probe_age_ms,omitempty"`
}

// ClusterStatus is every lockd's status as one lockd gathered it (each
// asked at once, a second at most); Error says why one did not answer.
type ClusterStatus struct {
	Self   string        `json:"self"`
	Lockds []LockdStatus `json:"lockds"`
}

// LockdStatus is one lockd of the directory and what it answered.
type LockdStatus struct {
	ID      uint64          `json:"id"`
	APIAddr string          `json:"api_addr"`
	Zone    string          `json:"zone,omitempty"`
	Status  *StatusResponse `json:"status,omitempty"`
	Error   string          `json:"error,omitempty"`
}
