package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/sdk/fence"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// granted is what every holder does with a grant (lock or election): check
// it with the service, record it, write under it, check it again. Like any
// client it acts on the SDK's word: a grant the service does not confirm is
// a violation, and its writes still go to the resource, where the fencing
// checker judges them. A grant whose node is already gone while the lock's
// Context is live is etcd #11456 (a grant reported after the session that
// owned the node ended): a violation, never a silent drop.
func (e *env) granted(c *sdk.Client, name, lock string, mode api.LockMode, node string, token uint64, s0 *sdk.Session, r *rand.Rand, hold *holding, live func() context.Context) {
	ctx, cancel := e.callCtx()
	defer cancel()
	s1, err := c.Session(ctx, cellName)
	if err != nil || s1.ID() != s0.ID() {
		return // the session changed under the grant: recorded as a loss by the monitor
	}
	var n api.Node
	if err := e.op(name, "get-node", func() (err error) { n, err = c.Get(ctx, node); return }); err != nil {
		if errors.Is(err, sdk.ErrNoNode) {
			e.goneAtGrant(name, node, live)
		}
		return
	}
	if exists, _, answered := e.checkHeld(c, name, lock, mode, node, "after grant"); !exists {
		e.goneAtGrant(name, node, live)
		return
	} else if !answered {
		// The fencing checker judges a write by what the service said of
		// its node; with no answer (a fault, or the run ending) there is
		// nothing to judge it by, so the holder does not write.
		e.logf("chaos: %s: no answer about %s after its grant; not writing under it", name, node)
		return
	}
	e.h.AddGrant(check.Grant{Lock: lock, Node: node, Mode: mode, Token: token, Session: s1.ID(), Owner: n.Owner,
		CreateIndex: n.CreateIndex, Epoch: e.epoch, Worker: name, At: hold.tmplStart()})
	writes := 1 + r.IntN(3)
	for w := 0; w < writes; w++ {
		lctx := live()
		if !hold.live(lctx, e.h.Now()) {
			break
		}
		kind, access := "fenced-write", e.res.Write
		if mode == api.LockShared {
			kind, access = "fenced-read", e.res.Read
		}
		start := e.h.Now()
		err := access(lock, token, s1.ID(), name, lctx)
		e.h.AddOp(check.Op{Worker: name, Kind: kind, Start: start, End: e.h.Now(), OK: err == nil, Local: true})
		if errors.Is(err, fence.ErrStaleToken) {
			e.logf("chaos: %s: holder of %s refused by the resource: %v", name, node, err)
		}
		sleepCtx(e.ctx, jitter(r, 2*time.Millisecond, 20*time.Millisecond))
	}
	e.checkHeld(c, name, lock, mode, node, "before release")
}

// goneAtGrant judges a grant whose node the service says does not exist.
// If the lock's Context was cancelled by then, the lease ran out after the
// grant (the client stopped acting before the cell could delete the node):
// a loss, which the session monitor records. If it is still live, the SDK
// reported a grant on a node that was gone.
func (e *env) goneAtGrant(name, node string, live func() context.Context) {
	e.h.Checked("grant-confirmed")
	if live().Err() == nil {
		e.h.AddViolation("grant-confirmed", fmt.Sprintf("%s was granted %s but the service says the node does not exist while the lock's Context is live (etcd #11456)", name, node))
	}
}

// checkHeld asks the service about node and records what it said. A node
// that exists and waits right after the client was granted it is a
// violation (the library reported a grant the service does not agree
// with). exists is false only if the service said the node is gone.
// answered is false if the service could not be asked.
func (e *env) checkHeld(c *sdk.Client, name, lock string, mode api.LockMode, node, when string) (exists, held, answered bool) {
	ctx, cancel := e.callCtx()
	defer cancel()
	var st api.LockStateResponse
	if err := e.op(name, "lock-state", func() (err error) { st, _, err = c.LockState(ctx, node, false); return }); err != nil {
		return true, false, false
	}
	if !st.Exists {
		return false, false, true
	}
	e.h.AddLockObs(check.LockObs{Lock: lock, Node: node, Mode: mode, Index: st.Index, Held: st.Held, Source: "lockstate"})
	if when == "after grant" {
		e.h.Checked("grant-confirmed")
	}
	if !st.Held && when == "after grant" {
		e.h.AddViolation("grant-confirmed", fmt.Sprintf("%s was granted %s but the service says it waits for %s (index %d)", name, node, st.WaitFor, st.Index))
	}
	return true, st.Held, true
}
