// Package fsm is the cell's replicated state machine: the namespace of nodes
// and the sessions that own them. It is pure and deterministic: a command and
// the Raft index it was committed at go in, a result and the list of changed
// paths come out. It reads no clock, draws no random number and does no I/O;
// anything time-dependent (lease expiry) is decided outside and arrives as a
// command. Every replica applying the same log holds byte-identical state.
package fsm

import (
	"github.com/lockservice/lockd/api"
)

// Op is a command's kind.
type Op string

const (
	OpOpenSession  Op = "open_session"
	OpCloseSession Op = "close_session"
	// OpExpireSession is proposed only by the leader's session manager and
	// carries the leader epoch it was decided under (see LeaderEpoch).
	OpExpireSession Op = "expire_session"
	OpCreate        Op = "create"
	OpPut           Op = "put"
	OpDelete        Op = "delete"
	// OpLeaderStart is the first entry every new leader commits. It bumps the
	// leader epoch (a second copy for the same replica and term changes
	// nothing); the new leader's session manager starts only once it has
	// applied it, and expiries decided under an older epoch are refused.
	OpLeaderStart Op = "leader_start"
	// OpLeaderTick records how long the current leader has led (by its own
	// monotonic clock, a lower bound). It drives the virtual leader clock
	// that bounds how long repeated fail-overs can keep a dead session alive
	// (etcd #9888). Epoch-guarded.
	OpLeaderTick Op = "leader_tick"
	// OpConfirm records that sessions renewed under the current leader.
	// A session's first KeepAlive under a leader is acknowledged only after
	// its confirm commits. Epoch-guarded.
	OpConfirm Op = "confirm"
	// OpCacheSession records that session Target caches reads, at its
	// first cacheable read: from then on a new leader waits for it to
	// learn of the new leadership (and flush) before changing a node it
	// may cache. Idempotent.
	OpCacheSession Op = "cache_session"
	// OpEnsurePrefix creates a prefix's root node (idempotent) and sets the
	// directory epoch that goes into the high bits of its tokens.
	OpEnsurePrefix Op = "ensure_prefix"
	// A prefix migration (prefix.go): the old cell seals the prefix (Cell
	// names the new one), the new cell stages the persistent nodes and
	// serves them from its ensure_prefix on; the old cell then drops its
	// copy, or, if the migration aborted, unseals it.
	OpSealPrefix   Op = "seal_prefix"
	OpUnsealPrefix Op = "unseal_prefix"
	OpStagePrefix  Op = "stage_prefix"
	OpDropPrefix   Op = "drop_prefix"
	// OpEndLockDelay ends the lock-delay of the lock directory Path that
	// the unclean release at index Since began, once the leader measured
	// the delay on its own clock from its apply of that release (or from
	// its own start, if it did not apply it). A later release of the same
	// lock restarts the delay, so an end naming an older one does nothing.
	OpEndLockDelay Op = "end_lock_delay"
)

// Command is one Raft log entry. Fields unused by an op stay zero.
type Command struct {
	Op Op `json:"op"`
	api.WriteHeader

	Path        string       `json:"path,omitempty"`
	Value       []byte       `json:"value,omitempty"`
	Version     *uint64      `json:"version,omitempty"`
	Ephemeral   bool         `json:"ephemeral,omitempty"`
	Sequential  bool         `json:"sequential,omitempty"`
	Lock        api.LockMode `json:"lock,omitempty"`
	MakeParents bool         `json:"make_parents,omitempty"`
	// ParentsFrom: make_parents creates missing ancestors only at or
	// below this path (the caller's grant; "" anywhere: an admin, or
	// auth off). An ancestor it would create above is refused forbidden.
	ParentsFrom string `json:"parents_from,omitempty"`
	// LockDelayMS: for a lock node's create, its lock-delay.
	LockDelayMS int64 `json:"lock_delay_ms,omitempty"`
	// Permits: for a permit lock node's create (api.LockPermit), its
	// semaphore's N, 1 to api.MaxPermits (semaphore.go). Codec V2.
	Permits int64 `json:"permits,omitempty"`
	// Container: for a create with MakeParents, the ancestors it makes
	// are containers, deleted with their last child (container.go).
	// Codec V2.
	Container bool `json:"container,omitempty"`
	// Uncontain: for a put, a container at Path becomes a plain node, as
	// if the put created it (uncontain.go). Codec V3, as is Container on
	// a put.
	Uncontain bool `json:"uncontain,omitempty"`
	// AtMS: for close_session, expire_session and ensure_prefix, the
	// proposer's wall clock (Unix ms). Shown as the start of a lock-delay
	// the release (or a moved prefix's first serving entry) begins; the
	// delay itself is timed by the leader's monotonic clock.
	AtMS int64 `json:"at_ms,omitempty"`
	// Since: for end_lock_delay, the index of the release that began it.
	Since uint64 `json:"since,omitempty"`

	LeaseMS int64 `json:"lease_ms,omitempty"` // open_session
	// For open_session, WriteHeader.Secret is the new session's secret,
	// drawn by the proposer; for every other op naming a session, the
	// secret the request carried, checked against the session's.

	// Tenant is the tenant the request's token belongs to ("" with auth
	// off) and Quota that tenant's quota as the proposer's directory view
	// had it: the state counts sessions, nodes and bytes per tenant and
	// refuses past Quota, deterministically, since both are in the entry.
	Tenant string     `json:"tenant,omitempty"`
	Quota  *api.Quota `json:"quota,omitempty"`
	// Admin: the request's tenant is an admin (or auth is off): it may
	// write or delete another session's ephemeral node.
	Admin bool `json:"admin,omitempty"`
	// OwnOnly: the caller may put or delete only its own session's
	// ephemeral nodes (a tenant holding the lock role but not write).
	OwnOnly bool `json:"own_only,omitempty"`
	// Nonce: for open_session, the client's name for this logical open; a
	// retry with the same nonce returns the session already opened.
	Nonce string `json:"nonce,omitempty"`

	// Epoch: for expire_session, the leader epoch it was decided under; for
	// ensure_prefix, the directory epoch; for leader_start, the leader epoch
	// PrevLeadershipMS measures; for set_codec, the log codec (codecgate.go).
	Epoch uint64 `json:"epoch,omitempty"`
	// Target is the session an expire_session ends.
	Target uint64 `json:"target,omitempty"`

	// ElapsedMS: for leader_tick, how long the leader has led.
	ElapsedMS int64 `json:"elapsed_ms,omitempty"`
	// Sessions: for confirm, the sessions that renewed; for hand_over,
	// the sessions whose silence SilentMS gives (the same order).
	Sessions []uint64 `json:"sessions,omitempty"`
	SilentMS []int64  `json:"silent_ms,omitempty"`

	// Cell: for seal_prefix, the cell the prefix moves to.
	Cell string `json:"cell,omitempty"`
	// DirIndex: for seal_prefix, the directory index of the migration's
	// begin; for unseal_prefix, that of a directory state with no
	// migration of the prefix in flight (it must not be older than the
	// seal's).
	DirIndex uint64 `json:"dir_index,omitempty"`
	// Staged: for ensure_prefix, the prefix arrives by a migration: serve
	// it only from a complete staged copy, never as a new empty prefix.
	Staged bool `json:"staged,omitempty"`
	// First and Last: for stage_prefix, this page starts the copy over,
	// or completes it.
	First bool `json:"first,omitempty"`
	Last  bool `json:"last,omitempty"`
	// Nodes: for stage_prefix, persistent nodes in path order.
	Nodes []api.ExportedNode `json:"nodes,omitempty"`
	// Page: for stage_prefix, the page's number in its driver's copy (from
	// 0); DirIndex is then that driver's generation (prefixmove.go).
	Page uint64 `json:"page,omitempty"`

	ReplicaID uint64 `json:"replica_id,omitempty"` // leader_start
	Term      uint64 `json:"term,omitempty"`       // leader_start
	// PrevLeadershipMS: for leader_start, how long the leadership that
	// began with leader epoch Epoch lasted, as the proposer measured it on
	// its monotonic clock from its own apply of that leadership's
	// leader_start to the proposal (a lower bound; 0 if unknown).
	PrevLeadershipMS int64 `json:"prev_leadership_ms,omitempty"`
	// HandOverIndex and HandOverMS: for leader_start, the index of the
	// hand_over entry the proposer applied last and how long ago, on its
	// monotonic clock, less the drift margin (handover.go; 0: none known).
	HandOverIndex uint64 `json:"hand_over_index,omitempty"`
	HandOverMS    int64  `json:"hand_over_ms,omitempty"`
	// Restored: for leader_start on a replica imported from a backup,
	// the restore plan it was imported by; only the first leader_start
	// after the restore applies it (restore.go).
	Restored *RestoreStart `json:"restored,omitempty"`

	// If and Then: for txn, its conditions and its writes (txn.go).
	If   []api.TxnCond `json:"if,omitempty"`
	Then []TxnOp       `json:"then,omitempty"`
}

// Encode serialises a command in the binary codec's version 1 (codec.go).
// A cell proposes with EncodeFor its state's codec instead (codecgate.go):
// a replica of an older build cannot read version 1.
func (c *Command) Encode() []byte {
	return encodeCommand(c)
}

// DecodeCommand parses a log entry: version 1 (binary), or version 0
// (JSON) as entries were written before it (codec.go).
func DecodeCommand(b []byte) (Command, error) {
	return decodeCommand(b)
}

// Result is what applying a command returns to its proposer. Err is set on
// a refused command (which then changed nothing).
type Result struct {
	Err     *api.Error `json:"err,omitempty"`
	Index   uint64     `json:"index"`
	Node    *api.Node  `json:"node,omitempty"`
	Token   uint64     `json:"token,omitempty"`
	WaitFor string     `json:"wait_for,omitempty"`
	Session uint64     `json:"session,omitempty"`
	Secret  string     `json:"secret,omitempty"` // open_session: the session's secret
	LeaseMS int64      `json:"lease_ms,omitempty"`
	Epoch   uint64     `json:"epoch,omitempty"`
	// Count and Digest: for seal_prefix, and the last page of
	// stage_prefix, the prefix's persistent nodes (prefixDigest).
	Count  int    `json:"count,omitempty"`
	Digest string `json:"digest,omitempty"`
	// TxnNodes: for a txn that applied, one node per write (txn.go).
	// FailedIf and FailedThen: for a refused txn, the condition or the
	// write that failed, counted from 1 (0: none).
	TxnNodes   []api.Node `json:"txn_nodes,omitempty"`
	FailedIf   int        `json:"failed_if,omitempty"`
	FailedThen int        `json:"failed_then,omitempty"`
}

// Encode serialises a result (results are kept per session for dedupe),
// in the binary codec's version 1 (codec.go).
func (r *Result) Encode() []byte {
	return encodeResult(r)
}

// DecodeResult parses a result of either codec version (codec.go).
func DecodeResult(b []byte) (Result, error) {
	return decodeResult(b)
}

// ChangeType is what a committed command did to a path, as far as watches care.
type ChangeType uint8

const (
	ChangeCreated ChangeType = iota + 1
	ChangeData
	ChangeDeleted
	ChangeChildren
	// ChangeMoved: the prefix at Path was sealed (it moved to another
	// cell); every watch under it fires a resync, so its client re-reads
	// and is sent to the new cell.
	ChangeMoved
	// ChangeLockDelay: the lock directory Path went into lock-delay at
	// Index (an unclean release). Every replica notes when it applied it,
	// so that a new leader can time the delay from there.
	ChangeLockDelay
	// ChangeLockDelayEnded: the lock directory's delay ended; its waiters
	// (who watch the directory meanwhile) re-check.
	ChangeLockDelayEnded
)

// Change is one path touched by a command, reported to the leader's watch
// table after apply. It is not part of the replicated state.
type Change struct {
	Path  string
	Type  ChangeType
	Index uint64
}
