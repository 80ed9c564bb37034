package api

// Locks: lock modes, lock state, queues, delays and token checks.

// LockMode marks an ephemeral sequential node as a lock waiter.
type LockMode string

const (
	LockNone      LockMode = ""
	LockExclusive LockMode = "exclusive"
	LockShared    LockMode = "shared"
)

// Valid reports whether m is a known mode.
func (m LockMode) Valid() bool {
	return m == LockNone || m == LockExclusive || m == LockShared ||
		m == LockPermit || m == LockUpgradable
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
	// Permits, on a semaphore (permit nodes), is its N, and InUse how
	// many permits hold now (0 and 0 on any other lock).
	Permits int `json:"permits,omitempty"`
	InUse   int `json:"in_use,omitempty"`
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
