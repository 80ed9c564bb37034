package chaos

import (
	"context"
	"math/rand/v2"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// lockWorker takes the lock at path (exclusive, or shared) over and over:
// TryLock; read its node (owner, create index) and lock state from the
// service; a few fenced writes to the resource while the lock's Context is
// live; the lock state again; Unlock.
func (e *env) lockWorker(name, path string, mode api.LockMode) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		e.lockOnce(c, name, path, mode, r)
		sleepCtx(e.ctx, jitter(r, 0, e.cfg.Think))
	}
}

func (e *env) lockOnce(c *sdk.Client, name, path string, mode api.LockMode, r *rand.Rand) {
	ctx, cancel := e.callCtx()
	defer cancel()
	s0, err := c.Session(ctx, cellName)
	if err != nil {
		return
	}
	var opts []sdk.LockOption
	if mode == api.LockShared {
		opts = append(opts, sdk.Shared())
	}
	m := c.NewMutex(path, opts...)
	if err := e.op(name, "lock", func() error { return m.TryLock(ctx, e.cfg.LockWait) }); err != nil {
		return
	}
	at := e.h.Now()
	hold := e.newHolding(path, m.Node(), name, mode)
	hold.live(m.Context(), at)
	defer func() {
		hold.release()
		uctx, ucancel := e.callCtx()
		defer ucancel()
		_ = e.tracedOp(uctx, name, "unlock", func(ctx context.Context) error { return m.Unlock(ctx) })
	}()
	e.granted(c, name, path, mode, m.Node(), m.Token(), s0, r, hold, m.Context)
}
