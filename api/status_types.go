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
