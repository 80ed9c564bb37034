package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// semaphorePath is the semaphore the semaphore workload contends for.
const semaphorePath = basePath + "/sem"

// The semaphore workload's shape when Config leaves it unset, and its
// bound.
const (
	defaultSemaphorePermits = 3
	maxSemaphoreWorkers     = 64
)

// semaphoreShape is the semaphore's N and how many workers contend for
// it (twice N unless Config says).
func semaphoreShape(cfg Config) (permits, workers int) {
	permits, workers = cfg.SemaphorePermits, cfg.SemaphoreWorkers
	if permits <= 0 {
		permits = defaultSemaphorePermits
	}
	if workers <= 0 {
		workers = 2 * permits
	}
	return permits, min(workers, maxSemaphoreWorkers)
}

// startSemaphoreWorkers starts the workers of the semaphore at
// semaphorePath; it returns the semaphores and their N (checker s).
func (r *run) startSemaphoreWorkers() map[string]int {
	e := r.e
	permits, workers := semaphoreShape(r.cfg)
	for k := 0; k < workers; k++ {
		name := fmt.Sprintf("sem-w%d", k)
		e.goWorker(func() { e.semaphoreWorker(name, permits) })
	}
	return map[string]int{semaphorePath: permits}
}

// semaphoreWorker takes a permit of the semaphore over and over:
// TryAcquire, hold it (its Context's live spans recorded, as a mutex
// holder's are) for two to four drift margins, so that a permit granted
// beyond N overlaps N others by more than the interval checker allows,
// then Release; each permit's token and times go to checker s.
func (e *env) semaphoreWorker(name string, permits int) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		e.permitOnce(c, name, permits, r)
		sleepCtx(e.ctx, jitter(r, 0, e.cfg.Think))
	}
}

func (e *env) permitOnce(c *sdk.Client, name string, permits int, r *rand.Rand) {
	ctx, cancel := e.callCtx()
	defer cancel()
	s := c.NewSemaphore(semaphorePath, permits)
	asked := e.h.Now()
	if err := e.op(name, "acquire", func() error { return s.TryAcquire(ctx, e.cfg.LockWait) }); err != nil {
		return
	}
	node, token := s.Node(), s.Token()
	if node == "" || token == 0 {
		// Lost between the grant and this read (its session ended: a
		// fault, or the run's end): nothing is held to act under or
		// check, as a lock worker's grant whose node is gone.
		e.logf("chaos: %s: permit lost before it could be read; not recorded", name)
		return
	}
	g := check.PermitGrant{Lock: semaphorePath, Node: node, Worker: name, Token: token, Asked: asked}
	hold := e.newHolding(semaphorePath, node, name, api.LockPermit)
	margin := sdk.DriftMargin(e.cfg.Lease)
	until := e.h.Now() + jitter(r, 2*margin, 4*margin)
	for k := 0; k < maxSemaphoreHoldSteps && e.h.Now() < until; k++ {
		if !hold.live(s.Context(), e.h.Now()) {
			break
		}
		sleepCtx(e.ctx, min(until-e.h.Now(), semaphoreHoldStep))
	}
	hold.release()
	uctx, ucancel := e.callCtx()
	defer ucancel()
	if e.op(name, "release", func() error { return s.Release(uctx) }) == nil {
		g.Released = e.h.Now()
	}
	e.h.AddPermitGrant(g)
}

// A holder re-checks its permit's Context every semaphoreHoldStep, at
// most maxSemaphoreHoldSteps times.
const (
	semaphoreHoldStep     = 20 * time.Millisecond
	maxSemaphoreHoldSteps = 1000
)
