package ctl

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// holder is what lockctl lock holds while COMMAND runs: a Mutex, or a
// Semaphore's permit (semaphoreHolder).
type holder interface {
	Lock(ctx context.Context) error
	TryLock(ctx context.Context, timeout time.Duration) error
	Unlock(ctx context.Context) error
	Context() context.Context
	Token() uint64
	Node() string
}

// semaphoreHolder is a Semaphore as a holder: Lock acquires a permit,
// Unlock releases it.
type semaphoreHolder struct{ *sdk.Semaphore }

func (s semaphoreHolder) Lock(ctx context.Context) error { return s.Acquire(ctx) }

func (s semaphoreHolder) TryLock(ctx context.Context, timeout time.Duration) error {
	return s.TryAcquire(ctx, timeout)
}

func (s semaphoreHolder) Unlock(ctx context.Context) error { return s.Release(ctx) }

// lockHolder is what lockctl lock PATH holds: with permits > 0 a permit of
// the semaphore PATH of that many, else the Mutex PATH (opts apply to
// either; shared is for a Mutex only).
func lockHolder(c *sdk.Client, path string, permits int, shared bool, opts []sdk.LockOption) (holder, error) {
	if permits == 0 {
		return c.NewMutex(path, opts...), nil
	}
	if shared {
		return nil, usagef("--shared and --permits exclude each other")
	}
	if permits < 1 || permits > api.MaxPermits {
		return nil, usagef("--permits %d is outside 1 to %d", permits, api.MaxPermits)
	}
	return semaphoreHolder{c.NewSemaphore(path, permits, opts...)}, nil
}

// printPermits writes a semaphore's permits in use (nothing for a lock of
// another kind).
func printPermits(w io.Writer, q api.LockQueueResponse) {
	if q.Permits > 0 {
		fmt.Fprintf(w, "semaphore: %d of %d permits in use\n", q.InUse, q.Permits)
	}
}
