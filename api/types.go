package api

// HTTP routes. Every request and response body is JSON. Node and session
// routes take POST; status, directory, health and metrics take GET.
const (
	RouteSessionOpen      = "/v1/session/open"
	RouteSessionKeepAlive = "/v1/session/keepalive"
	RouteSessionClose     = "/v1/session/close"
	// RouteKeepAliveBatch renews many sessions in one call: a lockproxy's
	// KeepAlive for all its clients' sessions on one cell.
	RouteKeepAliveBatch = "/v1/session/keepalive/batch"
	RouteCreate         = "/v1/node/create"
	RoutePut            = "/v1/node/put"
	RouteDelete         = "/v1/node/delete"
	RouteGet            = "/v1/node/get"
	RouteChildren       = "/v1/node/children"
	RouteLockState      = "/v1/lock/state"
	RouteWatch          = "/v1/watch"
	RouteStatus         = "/v1/status"
	RouteDirectory      = "/v1/directory"
	RouteHealth         = "/healthz"
	RouteMetrics        = "/metrics"
	// RouteAdminSnapshot makes the replica it is sent to save a snapshot.
	RouteAdminSnapshot = "/v1/admin/snapshot"
	// RouteAdminBackup makes a cell's leader export a snapshot to the
	// backup store.
	RouteAdminBackup = "/v1/admin/backup"
	// Directory administration, answered by the directory group.
	RouteAdminCellCreate   = "/v1/admin/cell/create"
	RouteAdminPrefixAssign = "/v1/admin/prefix/assign"
	RouteAdminRegister     = "/v1/admin/lockd/register"
	RouteAdminMigrate      = "/v1/admin/migrate"
	RouteAdminMember       = "/v1/admin/member"
	// RouteAdminRestore plans a cell's rebuild from a backup (lockctl
	// restore); lockd restore then imports it on each planned lockd.
	RouteAdminRestore = "/v1/admin/cell/restore"
	// RouteAdminTransfer makes a cell's leader hand leadership to the
	// replica on another lockd (leader balancing).
	RouteAdminTransfer = "/v1/admin/transfer"
	// RouteAdminPrefixOp is a migration step on one cell's leader.
	RouteAdminPrefixOp = "/v1/admin/prefix/op"
	// RouteAdminProxyRegister records a lockproxy in the directory.
	RouteAdminProxyRegister = "/v1/admin/proxy/register"
	// RouteAdminTenant creates, changes or deletes a tenant (admin);
	// RouteAdminTenants (GET) lists them; RouteAdminTenantCommit is a
	// lockd's forward of a tenant change to a directory replica.
	RouteAdminTenant = "/v1/admin/tenant"
	// RouteStatusPage (GET) is the status page: plain HTML and JS that
	// reads RouteStatusCluster (GET: every lockd's status, gathered by
	// the lockd asked) and RouteLockQueue (a lock's holders and waiters).
	RouteStatusPage    = "/status"
	RouteStatusCluster = "/v1/status/cluster"
	RouteLockQueue     = "/v1/lock/queue"
	// RouteLockCheck answers whether a fencing token is a current holder's
	// (Chubby's CheckSequencer), for resources that cannot keep a
	// high-water mark of their own.
	RouteLockCheck         = "/v1/lock/check"
	RouteAdminTenants      = "/v1/admin/tenants"
	RouteAdminTenantCommit = "/v1/admin/tenant/commit"

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
	// HeaderUnreachable names the API addresses (comma-separated) the
	// client failed to reach during this call and that have not answered
	// since: a dead leader other replicas may still name, and perhaps a
	// dead follower with it.
	HeaderUnreachable = "Lockd-Unreachable"
	// HeaderCell names the cell a path request is for, as the client's
	// directory routes it; without it the lockd routes by its own view.
	// Either way the cell's state decides (moved, wrong_cell).
	HeaderCell = "Lockd-Cell"
	// HeaderForwarded marks a request one lockd makes to another for its
	// own client (the status page's lock queue): it is not forwarded again.
	HeaderForwarded = "Lockd-Forwarded"
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
	// Secret is the session's secret (from its open): a write naming a
	// session without it is refused with unauthorized.
	Secret  string `json:"secret,omitempty"`
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
	// Secret, in an open's reply only: every later request naming the
	// session carries it (KeepAlive, close, writes, watches). Session ids
	// are Raft indices anyone can guess; the secret is 128 random bits.
	Secret  string `json:"secret,omitempty"`
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
	// LeaseAgeMS: the lease this reply confirms was renewed this long
	// before the request reached the server. 0 from a lockd (it renews on
	// receipt); a lockproxy renews its clients' leases in batches and
	// answers with the age of the last confirmed one. The client counts
	// its lease from its send time less this.
	LeaseAgeMS int64 `json:"lease_age_ms,omitempty"`
	// KeepAliveMS and GraceMS, in an open's reply: the cell's KeepAlive
	// interval and the grace a client in jeopardy should keep trying for
	// (0: lease/3 and the client's default, scaled to the lease).
	KeepAliveMS int64 `json:"keepalive_ms,omitempty"`
	GraceMS     int64 `json:"grace_ms,omitempty"`
	// Proxy names the lockproxy instance that answered ("" from a lockd):
	// a client whose replies start naming another one flushes its cache
	// and re-arms its watches there (the old proxy held them).
	Proxy string `json:"proxy,omitempty"`
	// CacheMS, through a proxy: how long after its send the client may
	// serve values the proxy made cacheable (what was left of the proxy's
	// own cache window on the cell when the request arrived; 0: none).
	CacheMS int64 `json:"cache_ms,omitempty"`
	// ProxyEvents are the proxy's own events for the session: the firing
	// of watches the proxy holds for it and invalidations of values it
	// served cacheable, numbered (Seq) per session by the proxy instance
	// and re-sent until a KeepAlive acknowledges them (ProxyAck).
	ProxyEvents []Event `json:"proxy_events,omitempty"`
}

// KeepAliveBatchRequest renews many sessions of one cell in one call (a
// lockproxy's, once a second, for all its clients). Sessions and AgeMS are
// parallel: AgeMS[i] is how long before the batch was sent its client's
// last KeepAlive reached the proxy, and the leader extends the lease to
// now − age + lease (never shortening it): a client that stopped sending
// loses its lease as it would talking to the leader directly. The leader
// holds the call until a session in it has an event the proxy has not
// seen, or WaitMS passes (at most MaxBatchWait), then confirms its
// leadership with one ReadIndex and answers.
type KeepAliveBatchRequest struct {
	Cell string `json:"cell"`
	// Proxy names the proxy (required): the leader tells it, in its next
	// batch, of events for any session it renewed last, so a batch
	// between its once-a-second full renewals may carry only the
	// sessions with something to acknowledge.
	Proxy  string `json:"proxy"`
	WaitMS int64  `json:"wait_ms,omitempty"`
	// Epoch is the leader epoch the proxy knows: the Seen values of Acks
	// belong to it (ignored under another).
	Epoch    uint64   `json:"epoch,omitempty"`
	Sessions []uint64 `json:"sessions"`
	AgeMS    []int64  `json:"age_ms"`
	// Secrets[i] is Sessions[i]'s secret as its client sent it; a
	// session whose secret does not match is not renewed (unauthorized).
	Secrets []string `json:"secrets,omitempty"`
	// Acks are the sessions that acknowledge events, hold events the
	// proxy has seen and its client has not acknowledged, or are new to
	// the proxy: the rest acknowledge nothing new.
	Acks []BatchAck `json:"acks,omitempty"`
}

// BatchAck is one session's acknowledgement in a batch: AckSeq under
// AckEpoch as its client sent it (the leader drops those events), and Seen,
// the highest seq the proxy already holds (the leader does not end the
// wait for those). New asks for the session's lease length in the reply.
type BatchAck struct {
	Session  uint64 `json:"session"`
	AckEpoch uint64 `json:"ack_epoch,omitempty"`
	AckSeq   uint64 `json:"ack_seq,omitempty"`
	Seen     uint64 `json:"seen,omitempty"`
	New      bool   `json:"new,omitempty"`
}

// KeepAliveBatchResponse answers a batch. Every session of the request not
// listed in Sessions was renewed and has nothing new to report; Sessions
// may also list other sessions the proxy renewed last that got events.
type KeepAliveBatchResponse struct {
	Epoch    uint64         `json:"epoch"`
	Index    uint64         `json:"index"`
	Sessions []BatchSession `json:"sessions,omitempty"`
}

// BatchSession is one session's part of a batch reply: its lease length
// and every unacknowledged event (when it has events beyond Seen or was
// New), or the error that stopped its renewal (session_expired,
// no_session, unavailable while its expiry is in flight).
type BatchSession struct {
	Session uint64  `json:"session"`
	LeaseMS int64   `json:"lease_ms,omitempty"`
	Events  []Event `json:"events,omitempty"`
	Error   *Error  `json:"error,omitempty"`
}

// ProxyInfo is a lockproxy registered in the directory.
type ProxyInfo struct {
	Name    string `json:"name"`
	APIAddr string `json:"api_addr"`
	Zone    string `json:"zone,omitempty"`
}

// ProxyStatus is a lockproxy's GET /v1/status.
type ProxyStatus struct {
	Proxy   ProxyInfo `json:"proxy"`
	Version string    `json:"version,omitempty"`
	// Clients are open client connections; Sessions the sessions it renews.
	Clients  int               `json:"clients"`
	Sessions int               `json:"sessions"`
	Cells    []ProxyCellStatus `json:"cells,omitempty"`
}

// ProxyCellStatus is what a lockproxy knows of one cell.
type ProxyCellStatus struct {
	Cell     string `json:"cell"`
	Epoch    uint64 `json:"epoch"`
	Sessions int    `json:"sessions"`
	// LastBatchAgeMS is how long ago its last batch was confirmed.
	LastBatchAgeMS int64  `json:"last_batch_age_ms"`
	Batches        uint64 `json:"batches"`
}

// KeepAliveRequest renews a session's lease and long-polls for its events:
// the leader extends the lease when it receives the request, drops the
// events AckSeq acknowledges, then holds the request until an event is
// pending or WaitMS passes (at most lease/2 and MaxKeepAliveWait). A newer
// KeepAlive of the session releases an older one still held.
type KeepAliveRequest struct {
	Cell    string `json:"cell"`
	Session uint64 `json:"session"`
	Secret  string `json:"secret,omitempty"`
	WaitMS  int64  `json:"wait_ms,omitempty"`
	// AckSeq is the highest event Seq the client has processed, under
	// leader epoch AckEpoch (seqs restart with each leadership). An ack
	// for another epoch than the leader's is ignored.
	AckSeq   uint64 `json:"ack_seq"`
	AckEpoch uint64 `json:"ack_epoch,omitempty"`
	// Proxy and ProxyAck acknowledge the ProxyEvents of that proxy
	// instance up to ProxyAck (a lockd ignores them).
	Proxy    string `json:"proxy,omitempty"`
	ProxyAck uint64 `json:"proxy_ack,omitempty"`
}

// CloseSessionRequest ends a session and frees everything it held.
type CloseSessionRequest struct {
	Cell    string `json:"cell"`
	Session uint64 `json:"session"`
	Secret  string `json:"secret,omitempty"`
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
	// LockDelayMS, for a lock node: if its session ends while the node
	// holds the lock (an expiry or a close, not a delete), nobody is
	// granted the lock for this long. 0 to MaxLockDelay.
	LockDelayMS int64 `json:"lock_delay_ms,omitempty"`
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
	Secret  string    `json:"secret,omitempty"` // the session's, when it names one
	Watch   WatchKind `json:"watch,omitempty"`
	// Cache asks the leader to record Session as a cacher of the node
	// (get only): the reply says whether it may be cached (Cacheable).
	// A session's first such read commits that it caches (a new leader
	// then waits for it to learn of the fail-over before changing a node
	// it may cache).
	Cache bool `json:"cache,omitempty"`
	// CacheWindowMS, with Cache: the cache window the client serves a
	// cacheable reply for, from the send of its last confirmed KeepAlive
	// (api.CacheWindowFor its lease). The leader grants the read to a
	// cache only if it is no longer than the window its invalidation
	// deadlines and fences allow for that session: a client that does not
	// say (built before short grants, which served 9 s) is served
	// uncached. Negative: bad_request.
	CacheWindowMS int64 `json:"cache_window_ms,omitempty"`
}

// GetResponse answers get. Exists is false (and the call succeeds) for a
// missing node only when a data watch was asked for; a plain get of a missing
// node fails with no_node.
type GetResponse struct {
	Exists bool   `json:"exists"`
	Node   Node   `json:"node"`
	Index  uint64 `json:"index"`
	// Cacheable: the leader recorded the session as a cacher of this
	// persistent node under leader epoch Epoch, and will invalidate it
	// before the node changes. The client may serve it from its cache
	// until then, while its lease is confirmed within CacheWindow.
	Cacheable bool   `json:"cacheable,omitempty"`
	Epoch     uint64 `json:"epoch,omitempty"`
	// Proxy names the lockproxy instance that made the reply cacheable
	// (from its shared cache): the client may cache it only while its
	// KeepAlives go through that instance, which invalidates it.
	Proxy string `json:"proxy,omitempty"`
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
	Secret  string `json:"secret,omitempty"`
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
	// Delay is set while the node waits for its lock's lock-delay
	// (WaitFor is then the lock's directory).
	Delay *LockDelayInfo `json:"delay,omitempty"`
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
	Secret  string      `json:"secret,omitempty"`
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
	// EventLockDelayEnded: the lock directory's lock-delay ended (its
	// data did not change); its waiters re-check.
	EventLockDelayEnded EventType = "lock_delay_ended"
	// EventResync says events were dropped (the session's queue overflowed or
	// the leader could not tell): re-read and re-arm every watch.
	EventResync EventType = "resync"
	// EventInvalidate tells a session's client to drop path from its
	// cache, and acknowledge (the leader holds the write until it does).
	EventInvalidate EventType = "invalidate"
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
	DirectoryIndex uint64          `json:"directory_index"`
	Cells          []ReplicaStatus `json:"cells"`
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

// LockQueueRequest asks for the lock nodes under Path (a Mutex's or an
// Election's directory), in queue order.
type LockQueueRequest struct {
	Path string `json:"path"`
}

// LockQueueResponse is a lock's queue, linearizable (ReadIndex): the
// holders first (one exclusive, or the leading shared ones), then the
// waiters; at most MaxLockQueue entries (More: there are others).
type LockQueueResponse struct {
	Path    string      `json:"path"`
	Index   uint64      `json:"index"`
	Entries []LockEntry `json:"entries"`
	More    bool        `json:"more,omitempty"`
	// Delay is set while the lock is in lock-delay.
	Delay *LockDelayInfo `json:"delay,omitempty"`
}

// LockDelayInfo is a lock in lock-delay: its holder's session ended while
// holding (the release at index Since), and nobody else is granted it
// until the delay, MS long, has run on the leader's clock. ReleasedAtMS
// and UntilMS are the leader's wall clock (Unix ms) at the release and
// that plus MS: the earliest the lock can be granted again.
type LockDelayInfo struct {
	Since        uint64 `json:"since"`
	MS           int64  `json:"ms"`
	ReleasedAtMS int64  `json:"released_at_ms,omitempty"`
	UntilMS      int64  `json:"until_ms,omitempty"`
}

// LockEntry is one lock node: its mode, owning session, whether it holds
// the lock and its fencing token.
type LockEntry struct {
	Node        string   `json:"node"`
	Mode        LockMode `json:"mode"`
	Session     uint64   `json:"session"`
	Held        bool     `json:"held"`
	Token       uint64   `json:"token"`
	CreateIndex uint64   `json:"create_index"`
}

// LockCheckRequest asks whether Token is held on the lock Path (a Mutex's
// or an Election's directory) right now.
type LockCheckRequest struct {
	Path  string `json:"path"`
	Token uint64 `json:"token"`
}

// LockCheckResponse answers a check, linearizably (a ReadIndex on the
// leader): Valid when a lock node holding Path's lock has Token. Holders
// are the tokens that hold it now (one exclusive, or the shared ones;
// none while free or in its lock-delay). The answer can be stale the
// moment it arrives: the holder may lose the lock just after.
type LockCheckResponse struct {
	Valid   bool     `json:"valid"`
	Holders []uint64 `json:"holders,omitempty"`
	Index   uint64   `json:"index"`
}

// MaxLockQueue bounds the entries of a LockQueueResponse.
const MaxLockQueue = 1000
