package api

// Ranges and the change feed: what the etcd gateway (proxy/etcdgw,
// docs/etcd.md) reads a cell with. Both are reads on the cell's leader
// after a ReadIndex (linearizable), refused unless the caller may read
// Root: an answer is never filtered by grants.

// Routes of ranges and the change feed.
const (
	// RouteRange reads the nodes whose paths lie in [Start, End).
	RouteRange = "/v1/node/range"
	// RouteRanges reads several ranges of one cell in one read: every
	// answer at one index (an etcd transaction's compares and reads).
	RouteRanges = "/v1/node/ranges"
	// RouteChanges reads the cell's change ring: every create, put and
	// delete of a node under Root applied at an index >= From.
	RouteChanges = "/v1/node/changes"
)

// Bounds of ranges and of the change ring.
const (
	// MaxRangeKeys bounds the nodes one range answer carries.
	MaxRangeKeys = 10_000
	// MaxRangeScan bounds the nodes one range visits to answer.
	MaxRangeScan = 100_000
	// MaxRangeBytes bounds the values one range answer carries; the
	// answer stops early (More) rather than exceed it.
	MaxRangeBytes = 8 << 20
	// MaxRangesPerRead bounds the ranges one RouteRanges read carries:
	// an etcd transaction's compares, its writes' keys and both branches' reads.
	MaxRangesPerRead = 192
	// MaxChangeRing bounds the changes a cell keeps (per replica, in
	// memory, not in snapshots: a replica restarted from a snapshot
	// keeps only what it applied since, and its Floor says so).
	MaxChangeRing = 10_000
	// MaxChangeRingBytes bounds the values the ring keeps; older changes
	// go first when either bound is reached. With MaxChangeRing's
	// entries, a replica's ring costs at most about 6 MB (values and
	// change records), per cell it hosts.
	MaxChangeRingBytes = 4 << 20
	// MaxChangesPerRead bounds the changes one RouteChanges answer
	// carries.
	MaxChangesPerRead = 1_000
	// MaxChangesWaitMS bounds how long RouteChanges holds a request with
	// nothing new (a long poll).
	MaxChangesWaitMS = 5_000
	// MaxChangesWaiters bounds the RouteChanges long polls one cell's
	// leader holds at once; a read past it is answered at once (as with
	// WaitMS 0).
	MaxChangesWaiters = 256
)

// RangeRequest reads the nodes of a cell whose paths p satisfy
// Start <= p < End in byte order (End "" : exactly Start), below Root.
type RangeRequest struct {
	// Root is a directory (or node) every path of the range lies under
	// or is: the caller needs the read role on it. Its top-level prefix
	// names the cell.
	Root  string `json:"root"`
	Start string `json:"start"`
	End   string `json:"end,omitempty"`
	// Limit bounds the nodes returned (0: MaxRangeKeys; at most that).
	Limit int `json:"limit,omitempty"`
	// KeysOnly leaves values out; CountOnly returns no nodes, only Count.
	KeysOnly  bool `json:"keys_only,omitempty"`
	CountOnly bool `json:"count_only,omitempty"`
	// SkipContainers leaves out containers (directories recipes made),
	// from the nodes and from Count.
	SkipContainers bool `json:"skip_containers,omitempty"`
}

// RangeResponse answers a range: Nodes in byte order of path, Count the
// number of nodes in the range (all of them, not only those returned),
// More whether nodes beyond the returned ones lie in the range.
type RangeResponse struct {
	Nodes []Node `json:"nodes,omitempty"`
	Count int    `json:"count"`
	More  bool   `json:"more,omitempty"`
	// Index is the cell's applied index the read saw; Epoch the
	// directory epoch of the range's prefix (revisions: docs/etcd.md).
	Index uint64 `json:"index"`
	Epoch uint64 `json:"epoch"`
}

// RangesRequest reads Reads (at most MaxRangesPerRead) in one read of
// one cell: every answer is at the same index. Root names the cell (its
// top-level prefix); each read's own Root must lie in that prefix and
// the caller needs the read role on each. Together the reads visit at
// most MaxRangeScan nodes and carry at most MaxRangeBytes of values, or
// the read is refused limit_exceeded.
type RangesRequest struct {
	Root  string         `json:"root"`
	Reads []RangeRequest `json:"reads"`
}

// RangesResponse answers a RangesRequest: one answer per read, in order,
// each with the one Index and Epoch the read saw.
type RangesResponse struct {
	Reads []RangeResponse `json:"reads"`
	Index uint64          `json:"index"`
	Epoch uint64          `json:"epoch"`
}

// ChangeKind is what a change did.
type ChangeKind string

const (
	ChangePut    ChangeKind = "put" // a create or a put
	ChangeDelete ChangeKind = "delete"
)

// Change is one node's change at Index: for a put the node as written
// (with its value), for a delete the node as it was (with its value).
// A session's end deleting its ephemeral nodes is one change per node
// at the index of the expiry or close.
type Change struct {
	Index uint64     `json:"index"`
	Kind  ChangeKind `json:"kind"`
	Node  Node       `json:"node"`
}

// ChangesRequest reads the changes applied at indexes >= From to nodes
// under Root (Root itself included), oldest first. With nothing there
// yet, the leader holds the request until a change arrives or WaitMS
// passes (at most MaxChangesWaitMS).
type ChangesRequest struct {
	Root   string `json:"root"`
	From   uint64 `json:"from"`
	Limit  int    `json:"limit,omitempty"` // 0: MaxChangesPerRead
	WaitMS int64  `json:"wait_ms,omitempty"`
}

// ChangesResponse answers a change read. Floor is the lowest index the
// ring still covers: From < Floor means changes between them may be gone
// (etcd's "compacted"). Index is the applied index the read saw: every
// change under Root at From..Index is in Changes unless More.
type ChangesResponse struct {
	Changes []Change `json:"changes,omitempty"`
	More    bool     `json:"more,omitempty"`
	Floor   uint64   `json:"floor"`
	Index   uint64   `json:"index"`
	Epoch   uint64   `json:"epoch"`
}
