package api

// Read-write locks: downgrade of a writer, the upgradable read and its
// upgrade (docs/design/recipes.md).

// LockUpgradable marks a lock node as an upgradable read: it holds as a
// shared node does, and at most one lock node of this mode exists in a
// directory (a second create is refused with CodeUpgradableTaken), so
// that it alone may become the writer (RouteLockMode) without a
// deadlock.
const LockUpgradable LockMode = "upgradable"

// RouteLockMode changes a lock node's mode in place (LockModeRequest).
const RouteLockMode = "/v1/lock/mode"

// CodeUpgradableTaken: an upgradable read's create (or a downgrade to
// one) in a directory where another upgradable node exists; nothing
// changed. Wait for that node's deletion and try again.
const CodeUpgradableTaken Code = "upgradable_taken"

// ErrUpgradableTaken matches an upgradable_taken error (errors.Is).
var ErrUpgradableTaken = &Error{Code: CodeUpgradableTaken}

// LockModeRequest changes the mode of the session's own lock node Path,
// keeping its place in the queue:
//   - a downgrade: an exclusive node that holds becomes Mode shared (or
//     upgradable), with the same token; the shared nodes queued behind
//     it up to the next exclusive one hold from this entry on and are
//     woken (a data event on Path);
//   - an upgrade: an upgradable node becomes exclusive (Mode exclusive),
//     with a new fencing token above every token granted on the lock
//     before; it holds once every other holder has gone (WaitFor names
//     the one it waits for), and lock nodes created after it wait for it.
//
// Any other change is refused: bad_request (a mode pair not above),
// forbidden (another session's node), conflict (a downgrade of a node
// that does not hold), upgradable_taken.
type LockModeRequest struct {
	WriteHeader
	Path string   `json:"path"`
	Mode LockMode `json:"mode"`
}

// LockModeResponse answers a mode change: the node, its token from
// now on, and the sibling it waits for (empty: it holds).
type LockModeResponse struct {
	Node    Node   `json:"node"`
	Index   uint64 `json:"index"`
	Token   uint64 `json:"token,omitempty"`
	WaitFor string `json:"wait_for,omitempty"`
}
