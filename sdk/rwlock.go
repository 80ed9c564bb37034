package sdk

// Read-write locks: a held writer's Downgrade to a reader in place, and
// the upgradable read (Upgradable) with its Upgrade to the writer. The
// cell changes the lock node's mode (api.RouteLockMode); its rules are
// in server/fsm/rwlock.go and docs/design/recipes.md.

import (
	"context"
	"errors"

	"github.com/lockservice/lockd/api"
)

// UpgradableLockNodePrefix is the name prefix of upgradable lock nodes
// (Upgradable); the cell appends the sequence number.
const UpgradableLockNodePrefix = "u-"

// Upgradable makes the Mutex an upgradable read lock: it holds as a
// shared (read) lock does, and Upgrade makes it the writer without a
// deadlock. One upgradable node at a time per lock: the cell refuses a
// second one (api.CodeUpgradableTaken), and Lock tries again after a
// backoff until it gets in or ctx ends (TryLock's timeout included).
func Upgradable() LockOption {
	return lockOptionFunc(func(m *Mutex) { m.mode = api.LockUpgradable })
}

// maxTakenRetries bounds how often one Lock of an upgradable Mutex tries
// again after api.CodeUpgradableTaken (ctx bounds it in time).
const maxTakenRetries = 1 << 16

// waitUpgradable is wait, tried again after a backoff while the cell
// refuses an upgradable node because another one is there.
func (m *Mutex) waitUpgradable(ctx, caller context.Context) error {
	for attempt := 0; ; attempt++ {
		err := m.wait(ctx, caller)
		if m.mode != api.LockUpgradable || api.CodeOf(err) != api.CodeUpgradableTaken || attempt >= maxTakenRetries {
			return err
		}
		sleepCtx(ctx, backoff(attempt))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// Downgrade makes a held exclusive lock a shared one, in place: the same
// node, token and place in the queue. The readers queued right behind it
// (up to the next writer) hold from then on and are woken. Context stays
// live. It fails with ErrNotHeld if the Mutex does not hold an exclusive
// grant, and with codec_too_old while some lockd of the cluster is of an
// older build.
func (m *Mutex) Downgrade(ctx context.Context) error {
	g, err := m.modeGrant(api.LockExclusive, false)
	if err != nil {
		return err
	}
	resp, _, err := g.s.setLockMode(ctx, g.node, api.LockShared)
	if err != nil {
		return err
	}
	m.mu.Lock()
	g.mode = api.LockShared
	g.version = max(g.version, resp.Node.Version)
	m.mu.Unlock()
	return nil
}

// Upgrade makes a held upgradable read lock the writer: it returns once
// every other reader has released (new readers queue behind it), with a
// new fencing token (Token) above every token granted on the lock
// before. Context ends when Upgrade starts (the read grant changes form)
// and is live again under the write grant. If ctx ends or the upgrade's
// outcome is unknown, the lock is released (its node deleted) and an
// error matching ErrLockLost is returned; a refusal (ErrNotHeld, say)
// leaves the read grant as it was.
func (m *Mutex) Upgrade(ctx context.Context) error {
	g, err := m.modeGrant(api.LockUpgradable, true)
	if err != nil {
		return err
	}
	resp, ch, err := g.s.setLockMode(ctx, g.node, api.LockExclusive)
	if err != nil && !unknownOutcome(err) && ctx.Err() == nil {
		m.endUpgrade(g, g.token, g.mode) // refused: nothing changed
		return err
	}
	token := resp.Token
	if err == nil && resp.WaitFor != "" {
		token, err = m.awaitUpgrade(ctx, g, resp, ch)
	}
	if err != nil {
		m.lose(g, err, "its upgrade did not complete")
		g.s.cleanup(context.WithoutCancel(ctx), cleanupTask{path: g.node})
		return recipeErr(codeLockLost, err, "lock %s: upgrade of %s abandoned, the lock released", m.path, g.node)
	}
	m.endUpgrade(g, token, api.LockExclusive)
	return nil
}

// modeGrant returns the current grant if it holds in mode with a live
// Context; with upgrading, it marks it upgrading and ends its Context.
func (m *Mutex) modeGrant(mode api.LockMode, upgrading bool) (*grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.g
	switch {
	case g == nil || !g.activeLocked() || g.s.Err() != nil:
		return nil, recipeErr(codeNotHeld, nil, "mutex %s is not held", m.path)
	case g.mode != mode || g.upgrading:
		return nil, recipeErr(codeNotHeld, nil, "mutex %s is held %s, not %s", m.path, g.mode, mode)
	case g.live.Err() != nil:
		return nil, recipeErr(codeNotHeld, nil, "mutex %s is in doubt: the session is in jeopardy", m.path)
	}
	if upgrading {
		g.upgrading = true
		g.liveCancel()
		g.signalLocked()
	}
	return g, nil
}

// awaitUpgrade waits, as Lock's waiter does, until the upgraded node
// holds: for each node it waits for, that node's event, then a re-list.
// It returns the node's token.
func (m *Mutex) awaitUpgrade(ctx context.Context, g *grant, resp api.LockModeResponse, ch <-chan api.Event) (uint64, error) {
	w := &lockWait{s: g.s, node: g.node, waitFor: resp.WaitFor, token: resp.Token, floor: resp.Index, ch: ch}
	for attempt := 0; attempt < maxUpgradeWakeups; attempt++ {
		if done, err := m.awaitWakeup(ctx, ctx, w); done {
			if err == nil {
				err = errors.New("upgrade wait ended")
			}
			return 0, err
		}
		st, nch, _, err := m.relist(ctx, g.s, g.node, w.floor)
		if err != nil {
			return 0, err
		}
		if !st.Exists {
			return 0, recipeErr(codeLockLost, nil, "lock %s: node %s was deleted during its upgrade", m.path, g.node)
		}
		m.noteUnheard(w, st)
		if st.Held {
			g.s.dropWatch(nch) // the monitor keeps its own watch on the node
			return st.Token, nil
		}
		w.floor, w.ch = st.Index, nch
	}
	return 0, recipeErr(codeLockLost, nil, "lock %s: upgrade woken %d times without a grant", m.path, maxUpgradeWakeups)
}

// maxUpgradeWakeups bounds the wake-ups of one Upgrade: one per reader
// it waits out (a lock queue holds at most api.MaxChildren nodes), and
// some to spare for re-lists.
const maxUpgradeWakeups = 1 << 20

// endUpgrade ends a mode change of g: its token and mode from now on,
// and a live Context again under the session's lease.
func (m *Mutex) endUpgrade(g *grant, token uint64, mode api.LockMode) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !g.activeLocked() {
		return
	}
	g.token, g.mode, g.upgrading = token, mode, false
	lc := g.s.LeaseContext()
	g.base = lc
	g.live, g.liveCancel = context.WithCancel(lc)
	g.signalLocked()
}

// setLockMode sends a lock node's mode change on this session, with the
// watch on what an upgrade waits for armed in the same apply.
func (s *Session) setLockMode(ctx context.Context, node string, mode api.LockMode) (api.LockModeResponse, <-chan api.Event, error) {
	var resp api.LockModeResponse
	id, err := s.reqs.begin(ctx)
	if err != nil {
		return resp, nil, err
	}
	defer s.reqs.end(id)
	gen, err := s.beginArming()
	if err != nil {
		return resp, nil, err
	}
	req := api.LockModeRequest{Path: node, Mode: mode}
	err = s.writeID(ctx, id, &req.WriteHeader, api.RouteLockMode, &req, &resp)
	ch := s.finishArming(err, func() (watchKey, uint64, bool) {
		if resp.WaitFor == "" {
			return watchKey{}, 0, false
		}
		return watchKey{WaitForPath(resp.Node.Path, resp.WaitFor), api.WatchData}, resp.Index, true
	}, gen)
	return resp, ch, err
}
