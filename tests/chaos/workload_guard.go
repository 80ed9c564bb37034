package chaos

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// The guarded-write workload: holders of one lock write a value through
// Mutex.Guard (the cell commits it only while their token holds the
// lock), and after each Unlock send one more write guarded by the token
// they just released, as a holder paused past its release would. The
// checker (check.CheckGuarded, "guarded-write") then requires the
// accepted writes' tokens to never go down in commit order and every
// stale write to be refused.
const (
	guardLock  = basePath + "/guard/lock"
	guardValue = basePath + "/guard/value"
	// guardWritesPerHold bounds the guarded writes of one holding.
	guardWritesPerHold = 3
	// maxGuardedWrites bounds the workload's recorded writes.
	maxGuardedWrites = 1_000_000
)

// guardLog is the guarded writes of a run.
type guardLog struct {
	mu sync.Mutex
	ws []check.GuardedWrite
}

func (g *guardLog) add(w check.GuardedWrite) {
	g.mu.Lock()
	if len(g.ws) < maxGuardedWrites {
		g.ws = append(g.ws, w)
	}
	g.mu.Unlock()
}

// guardWorkload runs n guard workers; once they end (with the run), it
// checks their writes into the history ("guarded-write").
func (e *env) guardWorkload(n int) {
	g := &guardLog{}
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		name := fmt.Sprintf("guard%d", k)
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.guardWorker(name, g)
		}()
	}
	wg.Wait()
	checked, vs := check.CheckGuarded(g.ws)
	accepted, staleRefused := 0, 0
	for _, w := range g.ws {
		switch {
		case w.Accepted:
			accepted++
		case w.Stale:
			staleRefused++
		}
	}
	e.logf("chaos: guarded writes: %d sent, %d accepted, %d stale ones refused, %d violations", checked, accepted, staleRefused, len(vs))
	for range checked {
		e.h.Checked("guarded-write")
	}
	for _, v := range vs {
		e.h.AddViolation(v.Checker, v.Detail)
	}
}

// guardWorker takes guardLock over and over and writes through Guard.
func (e *env) guardWorker(name string, g *guardLog) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		e.guardOnce(c, name, g, r)
		sleepCtx(e.ctx, jitter(r, 0, e.cfg.Think))
	}
}

// guardOnce is one holding: TryLock, a few guarded writes, Unlock, and
// the stale write with the released token.
func (e *env) guardOnce(c *sdk.Client, name string, g *guardLog, r *rand.Rand) {
	ctx, cancel := e.callCtx()
	defer cancel()
	m := c.NewMutex(guardLock)
	if err := e.op(name, "guard-lock", func() error { return m.TryLock(ctx, e.cfg.LockWait) }); err != nil {
		return
	}
	tok := m.Token()
	for k := 0; k < guardWritesPerHold && m.Context().Err() == nil; k++ {
		at := e.h.Now()
		res, err := m.Guard(ctx, []api.TxnOp{sdk.PutOp(guardValue, fmt.Appendf(nil, "%d %s", tok, name))})
		if err == nil {
			g.add(check.GuardedWrite{Writer: name, Lock: guardLock, Token: tok, Index: res.Index, Accepted: true, At: at})
		}
		sleepCtx(e.ctx, jitter(r, 0, e.cfg.Think/4))
	}
	if err := e.op(name, "guard-unlock", func() error { return m.Unlock(ctx) }); err != nil {
		return // the token may still hold (a delete of unknown outcome): no stale write
	}
	at := e.h.Now()
	res, err := c.Txn(ctx).If(sdk.IfHolds(guardLock, tok)).Then(sdk.PutOp(guardValue, fmt.Appendf(nil, "%d %s stale", tok, name))).Commit(ctx)
	g.add(check.GuardedWrite{Writer: name, Lock: guardLock, Token: tok, Index: res.Index, Accepted: err == nil, Stale: true, At: at})
}
