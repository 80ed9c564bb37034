// Package sdk is the Go client library for lockd, a Chubby-style lock
// service.
//
// A Client talks HTTP/JSON to the cells listed in the service directory. It
// routes every call to the cell that serves the path's top-level prefix,
// follows not_leader redirects, and retries transport failures and
// unavailable replies with bounded, jittered backoff until the caller's
// context ends. Every error it returns from the service is (or wraps) an
// *api.Error, so callers match codes with errors.Is:
//
//	if errors.Is(err, sdk.ErrNoNode) { ... }
//
// Per cell the client holds at most one Session, opened lazily when a call
// needs one (ephemeral nodes, watches, lock nodes) or explicitly with
// Client.Session. A session renews its lease with a long-polling KeepAlive
// on a connection pool of its own, receives watch events inside KeepAlive
// replies, notices leader fail-over by the cell's epoch changing (and then
// re-registers its watches), and reports Jeopardy, Safe, Failover and
// Expired on Session.Events. Fail-over is informational: nothing in the
// SDK turns it into an error.
//
// Writes made while the cell has a session carry the session's request id,
// so the retry loop can resend them safely: the cell applies each id once.
// A write without a session is retried only when it certainly did not
// reach the cell (a refused connection, a pooled connection the server had
// already closed, a not_leader reply); otherwise the caller gets
// unavailable, meaning the outcome is unknown.
//
// # Locks
//
// Mutex is the lock recipe. Lock creates an ephemeral sequential lock node
// under the lock's path ("w-" exclusive, "r-" shared). If the cell says it
// must wait, it waits only for the deletion of the one sibling the cell
// names (an exclusive node follows the nearest lower node of either mode, a
// shared node the nearest lower exclusive one); it never watches the lock
// node or its children, so a release wakes exactly the waiters that can
// make progress. On every wake-up it re-lists with LockState rather than
// assuming it is next (the predecessor may have been a waiter that gave
// up), arming the next predecessor watch in the same call, and repeats.
// A grant is reported only when a LockState read at least as new as the
// wake-up says the node holds, the node exists, and the session's lease is
// certain (not in jeopardy); a waiter in jeopardy waits for Safe and
// re-checks. After the grant a data watch on the own node turns its
// deletion, by anyone, into a loss. A lock node's create is deduplicated by
// its request id, so when a create's reply is lost (or TryLock's timeout or
// Lock's context ends while it is in flight) the create is resent under
// the same id, the reply names the node the first attempt made, and the
// node is deleted: giving up never leaves a node behind to block the lock.
//
// The Context rule: Mutex.Context (and Election.Context) is live only while
// the lock is held and the lease is certain. It is cancelled the moment
// the session enters jeopardy, the lock is lost (session expired, node
// deleted) or it is released. After SessionSafe the node is re-checked
// with LockState, and only then does a fresh call return a live context
// again, with the same node and token. A client in jeopardy may still hold
// its locks or may already have lost them: it must act as if it does not.
//
// Every grant carries a fencing token (Token): the node's create index
// with the directory epoch in the high bits, higher for every later
// holder. Fencing is the guarantee; jeopardy only stops a holder early. The
// protected resource keeps the highest token it has seen and refuses
// lower ones, and a new holder's first act is a fenced write that raises
// the mark before it reads state, so nothing from a paused old holder can
// land afterwards. Package sdk/fence implements the resource side.
//
// # Elections and groups
//
// Election is the same recipe with exclusive nodes holding the candidate's
// value: the lowest candidate leads. Campaign blocks until elected,
// Proclaim changes the leader's value, Resign steps down, Leader reads the
// current leader, and Observe follows it by watching only the leader's
// node (and the election's children while nobody leads). Jeopardy means
// "not leader" at once; leadership is regained only after Safe and a
// LockState re-check.
//
// Join adds the process to a group as an ephemeral sequential node;
// Members lists the live members in join order, and WatchMembers follows
// the set. CompareAndSet is a conditional write on a node's version.
package sdk
