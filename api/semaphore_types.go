package api

// Semaphores: a lock directory whose lock nodes are permits, at most N of
// which hold at once (docs/design/recipes.md).

// LockPermit marks a lock node as one permit of a semaphore: it holds
// while fewer than its directory's N permit nodes precede it in the queue.
// Permit nodes never share a directory with exclusive or shared ones.
const LockPermit LockMode = "permit"

// MaxPermits bounds a semaphore's N (CreateRequest.Permits).
const MaxPermits = 1024

// CodePermitsMismatch: a permit's create names an N other than the
// semaphore's (the permits present hold another), or a lock mode other
// than the lock nodes present (a permit under a mutex, or a mutex's node
// under a semaphore); nothing changed. Every client of one semaphore must
// use the same N.
const CodePermitsMismatch Code = "permits_mismatch"

// ErrPermitsMismatch matches a permits_mismatch error (errors.Is).
var ErrPermitsMismatch = &Error{Code: CodePermitsMismatch}
