package chaos

import (
	"errors"
	"fmt"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// churnWorker opens a session, creates an ephemeral node on it, checks the
// service made the session its owner, closes the session and checks the
// node is gone; every few rounds it closes the whole client and connects
// a new one.
func (e *env) churnWorker(name string) {
	r := e.rng(name)
	var c *sdk.Client
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		if c == nil || i%5 == 0 {
			if c != nil {
				_ = e.op(name, "client-close", c.Close)
			}
			var err error
			if c, err = e.newClient(name, false, e.cfg.RequestTimeout); err != nil {
				return
			}
		}
		e.churnOnce(c, name, i)
		sleepCtx(e.ctx, jitter(r, e.cfg.Think/4, e.cfg.Think))
	}
}

func (e *env) churnOnce(c *sdk.Client, name string, i int) {
	ctx, cancel := e.callCtx()
	defer cancel()
	var s *sdk.Session
	if err := e.op(name, "session-open", func() (err error) { s, err = c.Session(ctx, cellName); return }); err != nil {
		return
	}
	path := fmt.Sprintf("%s/%s-%d", churnBase, name, i)
	var cr api.CreateResponse
	err := e.op(name, "create-ephemeral", func() (err error) {
		cr, err = c.Create(ctx, path, []byte(name), sdk.Ephemeral(), sdk.MakeParents())
		return
	})
	if err != nil {
		if api.CodeOf(err) == api.CodeSessionExpired && e.ctx.Err() == nil {
			e.h.AddLoss(check.SessionLoss{Worker: name, Session: s.ID(), At: e.h.Now(), Err: err.Error() + lossDetail(s)})
		}
		_ = s.Close(ctx)
		return
	}
	e.h.Checked("session-churn")
	if cr.Node.Owner != s.ID() {
		e.h.AddViolation("session-churn", fmt.Sprintf("ephemeral %s created on session %d is owned by %d", path, s.ID(), cr.Node.Owner))
	}
	if err := e.op(name, "session-close", func() error { return s.Close(ctx) }); err != nil {
		return // outcome unknown
	}
	err = e.op(name, "get-closed", func() error {
		_, err := c.Get(ctx, path)
		if errors.Is(err, sdk.ErrNoNode) {
			return nil
		}
		if err == nil {
			return errStillExists
		}
		return err
	})
	if err == nil || errors.Is(err, errStillExists) {
		e.h.Checked("session-churn")
	}
	if errors.Is(err, errStillExists) {
		e.h.AddViolation("session-churn", fmt.Sprintf("ephemeral %s outlived the close of its session %d", path, s.ID()))
	}
}

var errStillExists = errors.New("node still exists")
