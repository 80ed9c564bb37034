package api

// Nodes: create, put, delete and read requests and their answers.

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
	// Container: a directory a lock recipe made (CreateRequest.Container),
	// deleted by the cell with its last child (docs/design/recipes.md).
	Container bool `json:"container,omitempty"`
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
	// Permits, for a permit lock node (LockPermit): the semaphore's N,
	// 1 to MaxPermits; every permit of one semaphore names the same.
	Permits int `json:"permits,omitempty"`
	// Container, with MakeParents: the ancestors this create makes are
	// containers, deleted by the cell when their last child goes (a lock
	// recipe's directory). A directory that exists is left as it is.
	Container bool `json:"container,omitempty"`
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
	// Container, with MakeParents: the directories this put makes are
	// containers, deleted with their last child (CreateRequest.Container).
	// Uncontain: a container at Path becomes a plain node, as if this put
	// created it (version 1, create index the put's): the etcd gateway's
	// put of a key that was only a parent. Both need log codec 3.
	Container bool `json:"container,omitempty"`
	Uncontain bool `json:"uncontain,omitempty"`
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
	// Shared: a lockproxy answered from its shared cache, with no read at
	// the cell (a value the leader will invalidate before it changes, so
	// as fresh as a read at the leader).
	Shared bool `json:"shared,omitempty"`
}

// ChildrenResponse answers children: names sorted by byte value (sequential
// names sharing a prefix are then in sequence order).
type ChildrenResponse struct {
	Node     Node     `json:"node"`
	Children []string `json:"children"`
	Index    uint64   `json:"index"`
}
