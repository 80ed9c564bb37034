package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// The read-back phase of Run: once the workloads stopped, every
// acknowledged key and config key read again on a fresh client, the state
// the hostile tenant must not have changed, and the side prefix's keys.

// readBack is what the run read back, and the history it ends.
type readBack struct {
	snap     check.Snapshot
	final    map[string]string // acknowledged key → value read back
	unread   map[string]bool   // acknowledged keys that could not be read
	finalOps []check.ConfigOp  // the config keys' reads, for the linearizability checker
	// hostileAfter is the state the hostile tenant must not have changed
	// (with the hostile tenant only).
	hostileAfter check.ClusterState
}

// readBack reads back the acknowledged and config keys (a failure is a
// liveness violation) and the hostile tenant's view, then takes the
// history's final snapshot.
func (r *run) readBack(ctx context.Context) readBack {
	var rb readBack
	snap := r.h.Snapshot()
	var err error
	rb.final, rb.unread, rb.finalOps, err = finalReads(r.c.Endpoints(), r.adminToken, snap.Acked, r.keys, r.h, r.cfg.RecoveryBound)
	if err != nil {
		r.x.violation("liveness", "final reads after the heal: %v", err)
	}
	if r.hs != nil {
		sctx, scancel := context.WithTimeout(ctx, r.cfg.RecoveryBound)
		rb.hostileAfter, err = clusterState(sctx, r.c.Endpoints(), r.adminToken, r.keys)
		scancel()
		if err != nil {
			r.h.AddViolation("hostile-state", fmt.Sprintf("the state after the run could not be read: %v", err))
		}
	}
	rb.snap = r.h.Snapshot()
	return rb
}

// sideReadBack is what the side prefix's keys read back.
type sideReadBack struct {
	final  map[string]string
	unread map[string]bool
	ops    []check.ConfigOp
}

// readBackSide reads back the side prefix's keys. A prefix left
// unavailable makes these reads wait out their bound: Run measures the
// outages before (checkCell).
func (r *run) readBackSide(snap check.Snapshot) sideReadBack {
	final, unread, ops := r.e.finalSideReads(r.c, snap, r.sideKeys)
	return sideReadBack{final: final, unread: unread, ops: ops}
}

// finalReads reads back every acknowledged key and each config key (the
// latter recorded as config gets for the linearizability checker). Keys it
// could not read are in unread, not in final; they fail the run (checker
// d) as well as the liveness bound.
func finalReads(endpoints []string, adminToken string, acked []check.AckedWrite, keys []string, h *check.History, bound time.Duration) (final map[string]string, unread map[string]bool, ops []check.ConfigOp, err error) {
	final, unread = map[string]string{}, map[string]bool{}
	// Each read is a ReadIndex round: a cross-region round trip on a
	// global cell. Budget one per key beyond the bound, many at once.
	ctx, cancel := context.WithTimeout(context.Background(), bound+time.Duration(len(acked))*20*time.Millisecond)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints, AuthToken: adminToken})
	if err != nil {
		for _, a := range acked {
			unread[a.Key] = true
		}
		return final, unread, nil, err
	}
	defer c.Close()
	ops, errs := readConfigKeys(ctx, c, keys, h)
	errs = readAcked(ctx, c, acked, final, unread, errs)
	if len(unread) > 0 {
		errs = append(errs, fmt.Errorf("%d acknowledged keys could not be read", len(unread)))
	}
	return final, unread, ops, errors.Join(errs...)
}

// readConfigKeys reads each config key, recorded as a config get.
func readConfigKeys(ctx context.Context, c *sdk.Client, keys []string, h *check.History) (ops []check.ConfigOp, errs []error) {
	for _, k := range keys {
		op := check.ConfigOp{Client: 1000, Key: k, Kind: check.ConfigGet, Call: h.Now()}
		n, err := c.Get(ctx, k)
		op.Return = h.Now()
		switch {
		case err == nil:
			op.Outcome, op.Exists, op.GotValue, op.Version = check.OutcomeOK, true, string(n.Value), n.Version
		case errors.Is(err, sdk.ErrNoNode):
			op.Outcome = check.OutcomeOK
		default:
			errs = append(errs, fmt.Errorf("get %s: %w", k, err))
			continue
		}
		ops = append(ops, op)
	}
	return ops, errs
}

// readAcked reads the acknowledged keys, 64 at once, into final (absent
// keys are left out) and unread; it adds errors to errs while it holds
// fewer than five.
func readAcked(ctx context.Context, c *sdk.Client, acked []check.AckedWrite, final map[string]string, unread map[string]bool, errs []error) []error {
	var (
		mu   sync.Mutex
		jobs = make(chan check.AckedWrite)
		wg   sync.WaitGroup
	)
	for w := 0; w < 64; w++ {
		wg.Go(func() {
			for a := range jobs {
				var (
					n   api.Node
					err = ctx.Err()
				)
				if err == nil {
					n, err = c.Get(ctx, a.Key)
				}
				mu.Lock()
				switch {
				case err == nil:
					final[a.Key] = string(n.Value)
				case errors.Is(err, sdk.ErrNoNode):
				default:
					unread[a.Key] = true
					if len(errs) < 5 {
						errs = append(errs, fmt.Errorf("get %s: %w", a.Key, err))
					}
				}
				mu.Unlock()
			}
		})
	}
	for _, a := range acked {
		jobs <- a
	}
	close(jobs)
	wg.Wait()
	return errs
}
