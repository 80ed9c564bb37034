package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// ackedWriter puts unique keys; every acknowledged one must read back at
// the end.
func (e *env) ackedWriter(name string) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		ctx, cancel := e.callCtx()
		if _, err := c.Session(ctx, cellName); err != nil {
			cancel()
			sleepCtx(e.ctx, 100*time.Millisecond)
			continue
		}
		key := fmt.Sprintf("%s/%s-%d", ackedBase, name, i)
		value := fmt.Sprintf("%x", r.Uint64())
		err := e.tracedOp(ctx, name, "acked-put", func(ctx context.Context) error {
			_, err := c.Put(ctx, key, []byte(value), sdk.MakeParents())
			return err
		})
		cancel()
		if err == nil {
			e.h.AddAcked(check.AckedWrite{Key: key, Value: value})
		}
		sleepCtx(e.ctx, jitter(r, e.cfg.Think/4, e.cfg.Think))
	}
}
