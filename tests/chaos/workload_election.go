package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// electionWorker campaigns, leads for a moment (fenced writes with the
// leader's token), and resigns, over and over. While it leads, the
// service's Leader must be this candidate.
func (e *env) electionWorker(name string) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		e.electOnce(c, name, r)
		sleepCtx(e.ctx, jitter(r, 0, e.cfg.Think))
	}
}

func (e *env) electOnce(c *sdk.Client, name string, r *rand.Rand) {
	ctx, cancel := e.callCtx()
	defer cancel()
	s0, err := c.Session(ctx, cellName)
	if err != nil {
		return
	}
	el := c.NewElection(electionPath)
	cctx, ccancel := context.WithTimeout(ctx, e.cfg.LockWait)
	err = e.op(name, "campaign", func() error { return el.Campaign(cctx, []byte(name)) })
	ccancel()
	if err != nil {
		return
	}
	at := e.h.Now()
	hold := e.newHolding(electionPath, "", name, api.LockExclusive)
	hold.live(el.Context(), at)
	defer func() {
		hold.release()
		rctx, rcancel := e.callCtx()
		defer rcancel()
		_ = e.tracedOp(rctx, name, "resign", func(ctx context.Context) error { return el.Resign(ctx) })
	}()
	token := el.Token()
	var li sdk.LeaderInfo
	if err := e.op(name, "leader", func() (err error) { li, err = el.Leader(ctx); return }); err != nil {
		return
	}
	e.h.Checked("election")
	if li.Token != token {
		if el.Context().Err() == nil {
			e.h.AddViolation("election", fmt.Sprintf("%s leads (token %d) but the service's leader is %s (token %d, value %q)", name, token, li.Node, li.Token, li.Value))
		}
		return
	}
	hold.setNode(li.Node)
	e.granted(c, name, electionPath, api.LockExclusive, li.Node, token, s0, r, hold, el.Context)
}
