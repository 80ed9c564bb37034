package sdk

// Semaphore: the lock recipe with N holders (a Mutex whose lock nodes are
// permits), docs/design/recipes.md.

import (
	"context"
	"time"

	"github.com/lockservice/lockd/api"
)

// PermitNodePrefix is the name prefix of a semaphore's permit nodes; the
// cell appends the 10-digit sequence number ("p-0000000057").
const PermitNodePrefix = "p-"

// ErrPermitsMismatch: a Semaphore's Acquire named an N other than the one
// the permits already at its path hold, or its path is a Mutex's (or a
// Semaphore's path is used as a Mutex's). Nothing was created. Every
// client of one semaphore must use the same N.
var ErrPermitsMismatch = api.ErrPermitsMismatch

// checkPermits refuses a Semaphore's N the cell would refuse.
func checkPermits(mode api.LockMode, n int) error {
	if mode == api.LockPermit && (n < 1 || n > api.MaxPermits) {
		return api.Errorf(api.CodeBadRequest, "a semaphore has 1 to %d permits (api.MaxPermits), not %d", api.MaxPermits, n)
	}
	return nil
}

// Semaphore is a counting lock at a path: at most N holders at once, each
// with a fencing token of its own (higher for every later permit of the
// semaphore). It is the Mutex recipe on permit nodes, with the same
// guarantees and the same calls beneath: Acquire puts an ephemeral
// sequential permit node in line; the cell grants it while fewer than N
// permits precede it. A waiter waits for its own grant, which the cell
// signals on its node when a holder's release lets it in: one release
// wakes one waiter (no herd). Act on a permit only under Context (live
// while held and the lease is certain, cancelled on jeopardy or loss) and
// send Token with every write to the protected resource.
//
// A Semaphore holds one permit at a time: Acquire while holding or
// acquiring fails with ErrBadRequest. Options are the Mutex's
// (WithLockDelay); Shared has no effect. An N outside 1 to api.MaxPermits
// fails Acquire with ErrBadRequest; one other than the semaphore's
// (the permits present) with ErrPermitsMismatch.
type Semaphore struct {
	m *Mutex
}

// NewSemaphore returns a semaphore of n permits at path. Nothing is sent
// until Acquire.
func (c *Client) NewSemaphore(path string, n int, opts ...LockOption) *Semaphore {
	m := c.NewMutex(path, opts...)
	m.mode, m.permits = api.LockPermit, n
	return &Semaphore{m: m}
}

// Acquire blocks until a permit is held and the session's lease is
// certain; as Mutex.Lock.
func (s *Semaphore) Acquire(ctx context.Context) error { return s.m.Lock(ctx) }

// TryAcquire is Acquire that gives up after timeout with ErrLockTimeout,
// leaving no node behind; as Mutex.TryLock.
func (s *Semaphore) TryAcquire(ctx context.Context, timeout time.Duration) error {
	return s.m.TryLock(ctx, timeout)
}

// Release gives the permit back (its node deleted, which wakes the one
// waiter it lets in); as Mutex.Unlock.
func (s *Semaphore) Release(ctx context.Context) error { return s.m.Unlock(ctx) }

// Token is the fencing token of the permit held, 0 if none.
func (s *Semaphore) Token() uint64 { return s.m.Token() }

// Node is the path of the permit node held, "" if none.
func (s *Semaphore) Node() string { return s.m.Node() }

// Held reports whether a permit is held (possibly in doubt: act only
// while Context is live).
func (s *Semaphore) Held() bool { return s.m.Held() }

// Context is live while the permit is held and the lease is certain; as
// Mutex.Context.
func (s *Semaphore) Context() context.Context { return s.m.Context() }

// Permits is the semaphore's N.
func (s *Semaphore) Permits() int { return s.m.permits }

// Wakeups counts the events that woke this Semaphore while it waited:
// one per grant it waited for (a diagnostic for herd effects).
func (s *Semaphore) Wakeups() int64 { return s.m.Wakeups() }

// Unheard counts the events this Semaphore's waits did not hear, found
// by the re-list after a lease of silence instead (Mutex.Unheard).
func (s *Semaphore) Unheard() int64 { return s.m.Unheard() }
