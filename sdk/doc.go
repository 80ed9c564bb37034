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
// re-registers its watches), and reports Failover and Expired on
// Session.Events.
//
// Writes made while the cell has a session carry the session's request id,
// so the retry loop can resend them safely: the cell applies each id once.
// A write without a session is retried only when it certainly did not
// reach the cell (a refused connection, a not_leader reply); otherwise the
// caller gets unavailable, meaning the outcome is unknown.
package sdk
