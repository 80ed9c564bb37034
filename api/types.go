package api

// HTTP routes. Every request and response body is JSON. Node and session
// routes take POST; status, directory, health and metrics take GET.
const (
	RouteSessionOpen      = "/v1/session/open"
	RouteSessionKeepAlive = "/v1/session/keepalive"
	RouteSessionClose     = "/v1/session/close"
	RouteCreate           = "/v1/node/create"
	RoutePut              = "/v1/node/put"
	RouteDelete           = "/v1/node/delete"
	RouteGet              = "/v1/node/get"
	RouteChildren         = "/v1/node/children"
	RouteLockState        = "/v1/lock/state"
	RouteWatch            = "/v1/watch"
	RouteStatus           = "/v1/status"
	RouteDirectory        = "/v1/directory"
	RouteHealth           = "/healthz"
	RouteMetrics          = "/metrics"
	// RouteAdminSnapshot makes the replica it is sent to save a snapshot.
	RouteAdminSnapshot = "/v1/admin/snapshot"
	// RouteAdminBackup makes a cell's leader export a snapshot to the
	// backup store.
	RouteAdminBackup = "/v1/admin/backup"

	// HeaderAuth carries the caller's auth token ("Bearer <token>") on every
	// request. Accepted and logged now; enforced once tenants exist.
	HeaderAuth = "Authorization"

	// HeaderWaitLeaderMS lets a replica hold a request up to this many
	// milliseconds (at most MaxLeaderWait) while the cell has no leader it
	// can use — none known, only the one in HeaderUnreachable, or itself
	// still starting — and answer once that changes: a fail-over costs the
	// client the election, not the election plus its backoff. Without it a
	// replica answers at once.
	HeaderWaitLeaderMS = "Lockd-Wait-Leader-Ms"
	// HeaderUnreachable names the API address the client last failed to
	// reach (a dead leader other replicas may still name).
	HeaderUnreachable = "Lockd-Unreachable"
)

// LockMode marks an ephemeral sequential node as a lock waiter.
type LockMode string

const (
	LockNone      LockMode = ""
	LockExclusive LockMode = "exclusive"
	LockShared    LockMode = "shared"
)

// Valid reports whether m is a known mode.
func (m LockMode) Valid() bool {
	return m == LockNone || m == LockExclusive || m == LockShared
}

// WriteHeader identifies a write for dedupe. Session and Request are optional
// for persistent-node writes (such a write is then not safe to retry);
// ephemeral creates need a session. Request ids are per session, start at 1
// and grow; Ack tells the cell every id below it has had its reply, so it may
// forget them.
type WriteHeader struct {
	Session uint64 `json:"session,omitempty"`
	Request uint64 `json:"request,omitempty"`
	Ack     uint64 `json:"ack,omitempty"`
}

// Node is a node's metadata, and its value where the call returns it.
type Node struct {
	Path        string   `json:"path"`
	Value       []byte   `json:"value,omitempty"`
	Version     uint64   `json:"version"`      // data version: 1 at create, +1 per put
	CreateIndex uint64   `json:"create_index"` // Raft index of the create
	ModifyIndex uint64   `json:"modify_index"` // Raft index of the last create or put
	ChildIndex  uint64   `json:"child_index"`  // Raft index of the last child create or delete
	Ephemeral   bool     `json:"ephemeral,omitempty"`
	Owner       uint64   `json:"owner,omitempty"` // owning session of an ephemeral node
	Lock        LockMode `json:"lock,omitempty"`
	NumChildren int      `json:"num_children"`
}

// OpenSessionRequest opens a session on Cell.
type OpenSessionRequest struct {
	Cell string `json:"cell"`
	// LeaseMS asks for a lease length; 0 takes the cell's default. The cell
	// clamps it to [MinLease, MaxLease].
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// Nonce names one logical open (at most MaxNonceLen bytes; empty: no
	// dedupe). A retry with the same nonce returns the session the first
	// attempt opened, while the cell remembers it (its last MaxOpenNonces
	// opens) and the session lives; the client draws a fresh random nonce
	// for every new open.
	Nonce string `json:"nonce,omitempty"`
}

// SessionResponse answers OpenSession and KeepAlive.
type SessionResponse struct {
	Session uint64 `json:"session"`
	LeaseMS int64  `json:"lease_ms"`
	// Epoch is the cell's leader epoch: it changes on every leader change,
	// which is how a client learns of a fail-over.
	Epoch uint64 `json:"epoch"`
	// Index is the cell's applied index when the reply was made.
	Index uint64 `json:"index"`
	// Events are the session's events not yet acknowledged, oldest first.
	// A reply may repeat events an earlier reply carried (that reply may
	// have been lost); the client processes each Seq once.
	Events []Event `json:"events,omitempty"`
}

// KeepAliveRequest renews a session's lease and long-polls for its events:
// the leader extends the lease when it receives the request, drops the
// events AckSeq acknowledges, then holds the request until an event is
// pending or WaitMS passes (at most lease/2 and MaxKeepAliveWait). A newer
// KeepAlive of the session releases an older one still held.
type KeepAliveRequest struct {
	Cell    string `json:"cell"`
	Session uint64 `json:"session"`
	WaitMS  int64  `json:"wait_ms,omitempty"`
	// AckSeq is the highest event Seq the client has processed, under
	// leader epoch AckEpoch (seqs restart with each leadership). An ack
	// for another epoch than the leader's is ignored.
	AckSeq   uint64 `json:"ack_seq"`
	AckEpoch uint64 `json:"ack_epoch,omitempty"`
}

// CloseSessionRequest ends a session and frees everything it held.
type CloseSessionRequest struct {
	Cell    string `json:"cell"`
	Session uint64 `json:"session"`
}

// CreateRequest creates a node. A Sequential node gets a 10-digit per-parent
// counter appended to its name. A Lock node must be ephemeral and sequential;
// the reply then says which sibling it waits for, if any.
type CreateRequest struct {
	WriteHeader
	Path        string   `json:"path"`
	Value       []byte   `json:"value,omitempty"`
	Ephemeral   bool     `json:"ephemeral,omitempty"`
	Sequential  bool     `json:"sequential,omitempty"`
	Lock        LockMode `json:"lock,omitempty"`
	MakeParents bool     `json:"make_parents,omitempty"`
}

// CreateResponse answers a create.
type CreateResponse struct {
	Node  Node   `json:"node"`
	Index uint64 `json:"index"`
	// Token is the fencing token of a lock node: valid as a grant once the
	// node holds the lock (WaitFor empty).
	Token uint64 `json:"token,omitempty"`
	// WaitFor is the sibling a lock node must see deleted before re-checking;
	// empty means the node holds the lock.
	WaitFor string `json:"wait_for,omitempty"`
}

// PutRequest writes a persistent node's value. Version nil: create or
// overwrite. Version 0: create only (must not exist). Version N: only if the
// current version is N (compare-and-set).
type PutRequest struct {
	WriteHeader
	Path        string  `json:"path"`
	Value       []byte  `json:"value"`
	Version     *uint64 `json:"version,omitempty"`
	MakeParents bool    `json:"make_parents,omitempty"`
}

// WriteResponse answers put and delete.
type WriteResponse struct {
	Node  Node   `json:"node"`
	Index uint64 `json:"index"`
}

// DeleteRequest deletes a childless node, if Version is set only at that version.
type DeleteRequest struct {
	WriteHeader
	Path    string  `json:"path"`
	Version *uint64 `json:"version,omitempty"`
}

// WatchKind says what a one-shot watch fires on.
type WatchKind string

const (
	// WatchData fires when the node's value changes, it is deleted, or (if it
	// did not exist) it is created.
	WatchData WatchKind = "data"
	// WatchChildren fires when a child is created or deleted, or the node is deleted.
	WatchChildren WatchKind = "children"
)

// ReadRequest is a linearizable read of one node (get, children). With Watch
// set, a one-shot watch is armed in the same call, atomically with the read,
// and delivered on Session.
type ReadRequest struct {
	Path    string    `json:"path"`
	Session uint64    `json:"session,omitempty"`
	Watch   WatchKind `json:"watch,omitempty"`
}

// GetResponse answers get. Exists is false (and the call succeeds) for a
// missing node only when a data watch was asked for; a plain get of a missing
// node fails with no_node.
type GetResponse struct {
	Exists bool   `json:"exists"`
	Node   Node   `json:"node"`
	Index  uint64 `json:"index"`
}

// ChildrenResponse answers children: names sorted by byte value (sequential
// names sharing a prefix are then in sequence order).
type ChildrenResponse struct {
	Node     Node     `json:"node"`
	Children []string `json:"children"`
	Index    uint64   `json:"index"`
}

// LockStateRequest re-checks a lock node after a wake-up: does it still
// exist, does it hold the lock, and if not which sibling does it wait for.
// With Watch, a deletion watch is armed on that sibling in the same call.
type LockStateRequest struct {
	Path    string `json:"path"`
	Session uint64 `json:"session"`
	Watch   bool   `json:"watch,omitempty"`
}

// LockStateResponse answers lock state.
type LockStateResponse struct {
	Exists  bool   `json:"exists"`
	Held    bool   `json:"held"`
	WaitFor string `json:"wait_for,omitempty"`
	Token   uint64 `json:"token,omitempty"`
	// Version is the lock node's data version (a holder's Proclaim is
	// conditional on it).
	Version uint64 `json:"version,omitempty"`
	Index   uint64 `json:"index"`
}

// WatchSpec re-arms a watch after a reconnect or fail-over: Since is the
// last index the client saw; if the node changed after it, the watch fires
// at once.
type WatchSpec struct {
	Path  string    `json:"path"`
	Kind  WatchKind `json:"kind"`
	Since uint64    `json:"since"`
}

// WatchRequest registers watches for Session on the cell serving their paths.
type WatchRequest struct {
	Cell    string      `json:"cell"`
	Session uint64      `json:"session"`
	Watches []WatchSpec `json:"watches"`
}

// WatchResponse answers watch registration.
type WatchResponse struct {
	Index uint64 `json:"index"`
}

// EventType is what happened to a watched node.
type EventType string

const (
	EventCreated         EventType = "created"
	EventDataChanged     EventType = "data_changed"
	EventDeleted         EventType = "deleted"
	EventChildrenChanged EventType = "children_changed"
	// EventResync says events were dropped (the session's queue overflowed or
	// the leader could not tell): re-read and re-arm every watch.
	EventResync EventType = "resync"
)

// Event is a one-shot watch firing, delivered on the session.
type Event struct {
	Type  EventType `json:"type"`
	Path  string    `json:"path"`
	Kind  WatchKind `json:"kind"`
	Index uint64    `json:"index"` // the index of the change
	// Seq numbers the session's events within one leadership (it grows
	// per session under one leader epoch). The event is re-sent in every
	// KeepAlive reply until a KeepAlive acknowledges it (AckSeq).
	Seq uint64 `json:"seq"`
}

// ErrorResponse is the body of every non-2xx reply.
type ErrorResponse struct {
	Error *Error `json:"error"`
}

// CellInfo describes a cell in the directory.
type CellInfo struct {
	Name     string   `json:"name"`
	ShardID  uint64   `json:"shard_id"`
	Prefixes []string `json:"prefixes"`
	// Epoch is the directory epoch, the high bits of every token the cell issues.
	Epoch uint64 `json:"epoch"`
	// Endpoints are the API addresses of the cell's replicas.
	Endpoints []string `json:"endpoints"`
}

// DirectoryResponse is the prefix → cell map.
type DirectoryResponse struct {
	Cells []CellInfo `json:"cells"`
}

// ReplicaStatus is one replica's view of one cell.
type ReplicaStatus struct {
	Cell         string `json:"cell"`
	ShardID      uint64 `json:"shard_id"`
	ReplicaID    uint64 `json:"replica_id"`
	Role         string `json:"role"` // leader, follower, unknown
	LeaderID     uint64 `json:"leader_id"`
	LeaderAPI    string `json:"leader_api,omitempty"`
	Term         uint64 `json:"term"`
	AppliedIndex uint64 `json:"applied_index"`
	Epoch        uint64 `json:"epoch"` // leader epoch in this replica's state
	Sessions     int    `json:"sessions"`
	Nodes        int    `json:"nodes"`
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
	Version   string          `json:"version"`
	ReplicaID uint64          `json:"replica_id"`
	APIAddr   string          `json:"api_addr"`
	RaftAddr  string          `json:"raft_addr"`
	Cells     []ReplicaStatus `json:"cells"`
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
