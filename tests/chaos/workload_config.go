package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// configWorker runs gets, puts and compare-and-sets on a few config keys,
// recording each for the linearizability checker. Its session makes every
// write carry a request id, so retries across fail-overs are deduplicated.
func (e *env) configWorker(id int, name string, keys []string) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	defer func() {
		st := c.CacheStats()
		e.configCache.hits.Add(st.Hits)
		e.configCache.misses.Add(st.Misses)
	}()
	r := e.rng(name)
	seen := map[string]uint64{}
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		ctx, cancel := e.callCtx()
		if _, err := c.Session(ctx, cellName); err != nil {
			cancel()
			sleepCtx(e.ctx, 100*time.Millisecond)
			continue
		}
		key := keys[r.IntN(len(keys))]
		op := e.configOnce(ctx, c, r, name, i, key, seen)
		op.Client = id
		cancel()
		e.h.AddConfig(op)
		sleepCtx(e.ctx, jitter(r, e.cfg.Think/4, e.cfg.Think))
	}
}

// configOnce runs one config get, put or compare-and-set on key and
// returns its record (the caller sets the client and records it).
func (e *env) configOnce(ctx context.Context, c *sdk.Client, r *rand.Rand, name string, i int, key string, seen map[string]uint64) check.ConfigOp {
	op := check.ConfigOp{Key: key, Call: e.h.Now()}
	tr := &sdk.Trace{} // a slow call keeps its attempts (tracedOp)
	ctx = sdk.WithTrace(ctx, tr)
	var (
		n      api.Node
		err    error
		cached bool // answered from a cache (the client's or a proxy's), with no read at the cell
	)
	switch p := r.IntN(10); {
	case p < 4:
		op.Kind = check.ConfigGet
		before := c.CacheStats()
		n, err = c.Get(ctx, key)
		after := c.CacheStats()
		// From the client's cache or a proxy's shared one: no read at
		// the cell, so no quorum needed (still linearizable: checker c).
		cached = after.Hits > before.Hits || after.SharedHits > before.SharedHits
	case p < 6:
		op.Kind = check.ConfigPut
		op.Value = fmt.Sprintf("%s-%d", name, i)
		n, err = c.Put(ctx, key, []byte(op.Value))
	default:
		op.Kind = check.ConfigCAS
		op.Value = fmt.Sprintf("%s-%d", name, i)
		op.Expect = seen[key]
		if r.IntN(5) == 0 && op.Expect > 0 {
			op.Expect-- // sometimes a stale expectation
		}
		n, err = c.CompareAndSet(ctx, key, []byte(op.Value), op.Expect)
	}
	op.Return = e.h.Now()
	if err != nil {
		op.Err = string(api.CodeOf(err))
	}
	switch {
	case err == nil:
		op.Outcome, op.Exists, op.Version = check.OutcomeOK, true, n.Version
		if op.Kind == check.ConfigGet {
			op.GotValue = string(n.Value)
		}
		seen[key] = n.Version
	case op.Kind == check.ConfigGet && errors.Is(err, sdk.ErrNoNode):
		op.Outcome, op.Exists = check.OutcomeOK, false
		seen[key] = 0
	case definite(err):
		op.Outcome = check.OutcomeFail
	default:
		op.Outcome = check.OutcomeUnknown
	}
	if op.Kind == check.ConfigGet && op.Outcome != check.OutcomeOK {
		op.Outcome = check.OutcomeFail
	}
	rec := check.Op{Worker: name, Kind: "config-" + string(op.Kind), Start: op.Call, End: op.Return, OK: err == nil, Local: cached}
	if rec.End-rec.Start > traceSlowAfter {
		rec.Detail = attemptsLine(tr)
	}
	e.h.AddOp(rec)
	return op
}

// definite reports whether a failed write certainly did not take effect.
func definite(err error) bool {
	switch api.CodeOf(err) {
	case api.CodeVersionMismatch, api.CodeNodeExists, api.CodeNoNode, api.CodeBadRequest,
		api.CodeInvalidPath, api.CodeValueTooLarge, api.CodeWrongCell, api.CodeNotEmpty:
		return true
	}
	return false
}
