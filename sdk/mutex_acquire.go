package sdk

// Acquiring a Mutex: the node put in line, the wait on the predecessor
// only, the re-list after every wake-up, the grant while the lease is
// certain, and the node given up on.

import (
	"context"
	"errors"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// Lock blocks until the lock is held and the session's lease is certain.
// If ctx ends first, Lock deletes its node (so none is left behind) and
// returns ctx's error. If the session ends while it waits, Lock returns an
// ErrLockLost error; if the client closes, ErrClosed.
func (m *Mutex) Lock(ctx context.Context) error { return m.acquire(ctx, 0) }

// TryLock is Lock that gives up after timeout with ErrLockTimeout. It
// leaves no node behind, even when the create's reply was lost: the create
// is resent with its request id, which names the node the first attempt
// made, and that node is deleted.
func (m *Mutex) TryLock(ctx context.Context, timeout time.Duration) error {
	if timeout <= 0 {
		return api.Errorf(api.CodeBadRequest, "TryLock needs a positive timeout")
	}
	return m.acquire(ctx, timeout)
}

func (m *Mutex) acquire(ctx context.Context, timeout time.Duration) error {
	m.mu.Lock()
	if m.acquiring || (m.g != nil && m.g.activeLocked()) {
		m.mu.Unlock()
		return api.Errorf(api.CodeBadRequest, "mutex %s is already held or being acquired", m.path)
	}
	m.acquiring, m.g = true, nil
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.acquiring = false
		m.mu.Unlock()
	}()

	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var err error
	for attempt := 0; ; attempt++ {
		// A wait refused because the prefix moved (its node, if any, went
		// with the seal) starts over on the cell it moved to.
		var from *cellState
		from, err = m.c.cellForPath(m.path)
		if err != nil {
			return err
		}
		err = m.waitUpgradable(wctx, ctx) // rwlock.go: m.wait, again while another upgradable node is there
		if attempt >= maxReroutes || !m.c.rerouted(wctx, m.path, from, err) {
			break
		}
	}
	if err != nil && timeout > 0 && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return recipeErr(codeLockTimeout, nil, "lock %s not acquired within %v", m.path, timeout)
	}
	return err
}

// wait runs the recipe: create the node, wait on the predecessor only,
// re-list after every wake-up, and grant only when the re-list says held
// at an index at least as new as the wake-up while the lease is certain.
//
// ctx bounds the wait (TryLock's timeout); caller is the caller's own
// context, which bounds the removal of a node given up on: TryLock's
// timeout still removes its node before returning, a caller whose own
// context ended is never held up by it.
func (m *Mutex) wait(ctx, caller context.Context) error {
	cs, err := m.c.cellForPath(m.path)
	if err != nil {
		return err
	}
	req, err := m.createRequest()
	if err != nil {
		return err
	}
	w, err := m.enqueue(ctx, caller, cs, req)
	if err != nil {
		return err
	}
	for {
		var done bool
		if w.held {
			done, err = m.takeGrant(ctx, caller, w)
		} else {
			done, err = m.awaitWakeup(ctx, caller, w)
		}
		if done {
			return err
		}
		if err := m.relistWait(ctx, caller, w); err != nil {
			return err
		}
	}
}

// lockWait is one wait's node and what the last create or re-list said
// of it.
type lockWait struct {
	s       *Session
	node    string
	waitFor string // the predecessor, as of the create or the last re-list that found one
	// silent: the last wait ended by a lease of silence, not an event.
	silent  bool
	held    bool
	token   uint64
	floor   uint64 // the index the next re-list must reach (the latest wake-up's)
	version uint64
	// While held, ch is the deletion watch on the own node (armed by the
	// create or the re-list that found it holding), at version; else the
	// predecessor's.
	ch <-chan api.Event
	lc context.Context // the LeaseContext as of just before the read
}

// createRequest is the create of the Mutex's lock node.
func (m *Mutex) createRequest() (*api.CreateRequest, error) {
	req, err := lockCreateRequest(m.path, m.mode, m.value)
	if err == nil {
		err = checkLockDelay(m.delay)
		req.LockDelayMS = m.delay.Milliseconds()
	}
	if err == nil {
		err = checkPermits(m.mode, m.permits) // semaphore.go
		req.Permits = m.permits
	}
	return req, err
}

// enqueue puts the lock node in line on cs under the session and a
// request id; a create whose outcome is unknown is resent in the
// background under the same id and its node deleted.
func (m *Mutex) enqueue(ctx, caller context.Context, cs *cellState, req *api.CreateRequest) (*lockWait, error) {
	s, err := m.c.session(ctx, cs)
	if err != nil {
		return nil, m.waitErr(ctx, nil, err)
	}
	id, err := s.reqs.begin(ctx)
	if err != nil {
		return nil, m.waitErr(ctx, s, err)
	}
	lc := s.LeaseContext()
	resp, ch, err := s.createLockNode(ctx, id, req)
	if err != nil {
		if unknownOutcome(err) {
			// The node may exist with a name we never learned: resend the
			// create under the same id to learn it, then delete it.
			s.cleanup(caller, cleanupTask{id: id, create: req})
		} else {
			s.reqs.end(id)
		}
		return nil, m.waitErr(ctx, s, err)
	}
	s.reqs.end(id)
	return &lockWait{s: s, node: resp.Node.Path, waitFor: resp.WaitFor,
		held: resp.WaitFor == "" || mutant.On(mutant.GrantEarly), token: resp.Token, floor: resp.Index,
		version: resp.Node.Version, ch: ch, lc: lc}, nil
}

// takeGrant records the grant of a node that holds, once the lease is
// certain. done: the wait is over, with err (nil: granted). Not done: the
// lease fell into doubt and is certain again; the node is re-listed.
func (m *Mutex) takeGrant(ctx, caller context.Context, w *lockWait) (done bool, err error) {
	s := w.s
	ownCh := w.ch
	if mutant.On(mutant.GrantEarly) && w.waitFor != "" {
		ownCh = nil // ch watches the predecessor: the broken build must not take it for its own
	}
	if s.certain(w.lc) {
		done, err := m.grant(ctx, s, w.node, w.token, w.version, ownCh, w.lc)
		if done {
			if err != nil {
				return true, m.giveUp(ctx, caller, s, w.node, err)
			}
			return true, nil
		}
		// The lease fell into doubt during the grant: wait for it
		// and re-check.
	}
	// Pitfall 2: never report a grant while the lease is in doubt.
	if err := s.waitCertain(ctx); err != nil {
		return true, m.giveUp(ctx, caller, s, w.node, err)
	}
	return false, nil
}

// awaitWakeup waits for the predecessor's event, or a lease of silence.
// done: the wait is over, with err.
func (m *Mutex) awaitWakeup(ctx, caller context.Context, w *lockWait) (done bool, err error) {
	s := w.s
	// Second net: the cell re-sends events until acknowledged, but a
	// waiter that hears nothing of its predecessor for a lease
	// re-lists rather than wait forever on a lock that may be free.
	silence := time.NewTimer(s.Lease())
	select {
	case ev := <-w.ch:
		silence.Stop()
		if ev.Type == EventSessionExpired || ev.Type == EventSessionClosed {
			return true, m.waitErr(ctx, s, s.Err())
		}
		m.wakeups.Add(1)
		w.floor = max(w.floor, ev.Index)
		w.silent = false
	case <-silence.C:
		s.dropWatch(w.ch) // the re-list arms a fresh one
		w.silent = true
		m.c.log.Debug("lock waiter heard nothing for a lease; re-listing", "node", w.node)
	case <-s.Done():
		return true, m.waitErr(ctx, s, s.Err())
	case <-ctx.Done():
		return true, m.giveUp(ctx, caller, s, w.node, ctx.Err())
	}
	return false, nil
}

// relistWait re-lists the node after every wake-up, never assuming: the
// predecessor may have been a waiter that gave up.
func (m *Mutex) relistWait(ctx, caller context.Context, w *lockWait) error {
	s := w.s
	if w.held && w.ch != nil {
		s.dropWatch(w.ch) // the re-list arms a fresh own-node watch
	}
	st, ch, lc, err := m.relist(ctx, s, w.node, w.floor)
	if err != nil {
		return m.giveUp(ctx, caller, s, w.node, err)
	}
	if !st.Exists {
		return recipeErr(codeLockLost, s.Err(), "lock %s: node %s was deleted while it waited", m.path, w.node)
	}
	m.noteUnheard(w, st)
	w.held, w.token, w.floor, w.version, w.ch, w.lc = st.Held, st.Token, st.Index, st.Version, ch, lc
	return nil
}

// noteUnheard counts a re-list after a lease of silence that finds the
// predecessor gone (the node holds, or waits for another): a release
// whose event this waiter did not hear before its second net caught it.
func (m *Mutex) noteUnheard(w *lockWait, st api.LockStateResponse) {
	if w.silent && !w.held && (st.Held || WaitForPath(w.node, st.WaitFor) != WaitForPath(w.node, w.waitFor)) {
		m.unheard.Add(1)
		m.c.log.Info("lock waiter's predecessor went without an event it heard; the re-list after a lease of silence found it", "node", w.node, "predecessor", w.waitFor)
	}
	w.silent = false
	if !st.Held {
		w.waitFor = st.WaitFor
	}
}

// relist re-checks node with LockState, arming the predecessor watch in
// the same call, until it has a read at least as new as floor (the
// wake-up's index) that it can act on. lc is the LeaseContext as of just
// before the read.
func (m *Mutex) relist(ctx context.Context, s *Session, node string, floor uint64) (api.LockStateResponse, <-chan api.Event, context.Context, error) {
	for attempt := 0; ; attempt++ {
		lc := s.LeaseContext()
		st, ch, err := s.lockState(ctx, node, true)
		m.relists.Add(1)
		if err != nil {
			return st, nil, lc, err
		}
		if st.Index >= floor && (!st.Exists || st.Held || ch != nil) {
			return st, ch, lc, nil
		}
		m.c.log.Debug("lock re-list older than its wake-up; reading again", "node", node, "index", st.Index, "floor", floor)
		sleepCtx(ctx, backoff(attempt))
		if ctx.Err() != nil {
			return st, nil, lc, ctx.Err()
		}
	}
}

// grant records the grant of node, whose deletion watch the call that
// found it holding (the create, or the re-list) armed in the same apply or
// lookup: ownCh, at the node's data version. Without one (a cell that arms
// none) it arms it with a read that also confirms the node exists. done is
// false if the lease fell into doubt meanwhile: the caller waits for it and
// re-checks.
func (m *Mutex) grant(ctx context.Context, s *Session, node string, token, version uint64, ownCh <-chan api.Event, lc context.Context) (done bool, err error) {
	nodeCh := ownCh
	if nodeCh == nil {
		gr, ch, err := s.getW(ctx, node)
		if err != nil {
			return true, err
		}
		if !gr.Exists {
			return true, recipeErr(codeLockLost, s.Err(), "lock %s: node %s was deleted as it was granted", m.path, node)
		}
		nodeCh, version = ch, gr.Node.Version
	}
	if !s.certain(lc) {
		if ownCh == nil {
			s.dropWatch(nodeCh)
		}
		return false, nil
	}
	g := &grant{s: s, node: node, token: token, mode: m.mode, version: version, done: make(chan struct{}), base: lc, changed: make(chan struct{})}
	g.ctx, g.cancel = context.WithCancel(s.ctx)
	g.live, g.liveCancel = context.WithCancel(lc)
	m.mu.Lock()
	m.g = g
	m.mu.Unlock()
	go m.monitor(g, nodeCh)
	return true, nil
}

// waitErr maps the error that ended a wait with no node of ours left.
func (m *Mutex) waitErr(ctx context.Context, s *Session, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, ErrClosed):
		return ErrClosed
	case sessionGone(err) || (s != nil && s.Err() != nil):
		if s != nil && s.Err() == ErrClosed {
			return ErrClosed
		}
		return recipeErr(codeLockLost, err, "lock %s: the session ended while it waited", m.path)
	}
	return err
}

// giveUp ends a wait that has a node: it deletes the node (at once if it
// can, else in the background while the session lives) and maps err.
func (m *Mutex) giveUp(ctx, caller context.Context, s *Session, node string, err error) error {
	if s.Err() == nil && !errors.Is(err, ErrClosed) && !sessionGone(err) {
		s.cleanup(caller, cleanupTask{path: node})
	}
	return m.waitErr(ctx, s, err)
}
