package sdk

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
)

// LockOption configures a Mutex made by NewMutex.
type LockOption interface{ applyLock(*Mutex) }

type lockOptionFunc func(*Mutex)

func (f lockOptionFunc) applyLock(m *Mutex) { f(m) }

// Shared makes the Mutex a shared (read) lock: it is held together with
// other shared holders and excludes exclusive ones. The default is
// exclusive.
func Shared() LockOption { return lockOptionFunc(func(m *Mutex) { m.mode = api.LockShared }) }

// WithLockDelay gives the lock a lock-delay (Chubby's): if this holder's
// session ends while it holds the lock (it expired, or the client closed
// without Unlock), nobody is granted the lock for d, so that requests the
// lost holder still had in flight drain before anyone else acts. A clean
// Unlock hands over at once. 0 (the default) to api.MaxLockDelay (one
// minute); a delay outside that fails Lock with ErrBadRequest.
func WithLockDelay(d time.Duration) LockOption {
	return lockOptionFunc(func(m *Mutex) { m.delay = d })
}

// lockValue stores v in the lock node (elections keep the candidate's
// value there).
func lockValue(v []byte) LockOption { return lockOptionFunc(func(m *Mutex) { m.value = v }) }

// cancelledCtx is the Context of a Mutex that holds nothing.
var cancelledCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Mutex is a distributed lock at a path (the lock recipe of the package
// documentation). Lock puts an ephemeral sequential node in line under the
// path, waits only for the deletion of the node it must follow, and
// re-checks on every wake-up; the grant carries a fencing token (Token)
// that is higher for every later holder. Act on the lock only under
// Context, and send the token with every write to the protected resource
// (package sdk/fence): the new holder's first act is a fenced write that
// raises the resource's mark before it reads any state.
//
// A Mutex is one grant at a time: Lock or TryLock on a Mutex that holds
// its lock or is acquiring it fails with ErrBadRequest; after Unlock (or a
// loss) it may be locked again. Its methods are safe for concurrent use.
type Mutex struct {
	c     *Client
	path  string
	mode  api.LockMode
	value []byte
	delay time.Duration // lock-delay (WithLockDelay)

	wakeups atomic.Int64 // predecessor events that woke this Mutex while it waited
	relists atomic.Int64 // LockState re-lists while waiting

	mu        sync.Mutex
	acquiring bool
	g         *grant // the current grant (possibly lost); nil if none
}

// grant is one holding of the lock: a node that held it while the lease
// was certain.
type grant struct {
	s     *Session
	node  string
	token uint64

	// ctx ends on Unlock, on loss and when the session ends: it bounds the
	// monitor, which closes done when it returns.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// Guarded by Mutex.mu.
	version    uint64 // the node's data version (Proclaim is conditional on it)
	lost       error  // set once the lock is lost
	released   bool   // Unlock was called
	base       context.Context
	live       context.Context // Context(): derived from base, a LeaseContext
	liveCancel context.CancelFunc
	changed    chan struct{} // closed (and replaced) when live or lost changes
}

func (g *grant) activeLocked() bool { return g.lost == nil && !g.released }

func (g *grant) signalLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// NewMutex returns an exclusive lock at path (Shared() for a read lock).
// Nothing is sent until Lock.
func (c *Client) NewMutex(path string, opts ...LockOption) *Mutex {
	m := &Mutex{c: c, path: path, mode: api.LockExclusive}
	for _, o := range opts {
		o.applyLock(m)
	}
	return m
}

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
		err = m.wait(wctx, ctx)
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
	req, err := lockCreateRequest(m.path, m.mode, m.value)
	if err == nil {
		err = checkLockDelay(m.delay)
		req.LockDelayMS = m.delay.Milliseconds()
	}
	if err != nil {
		return err
	}
	s, err := m.c.session(ctx, cs)
	if err != nil {
		return m.waitErr(ctx, nil, err)
	}
	id, err := s.reqs.begin(ctx)
	if err != nil {
		return m.waitErr(ctx, s, err)
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
		return m.waitErr(ctx, s, err)
	}
	s.reqs.end(id)
	node := resp.Node.Path

	held, token, floor := resp.WaitFor == "" || brokenGrantEarly, resp.Token, resp.Index
	// While held, ch is the deletion watch on the own node (armed by the
	// create or the re-list that found it holding), at version.
	version := resp.Node.Version
	for {
		if held {
			ownCh := ch
			if brokenGrantEarly && resp.WaitFor != "" {
				ownCh = nil // ch watches the predecessor: the broken build must not take it for its own
			}
			if s.certain(lc) {
				done, err := m.grant(ctx, s, node, token, version, ownCh, lc)
				if done {
					if err != nil {
						return m.giveUp(ctx, caller, s, node, err)
					}
					return nil
				}
				// The lease fell into doubt during the grant: wait for it
				// and re-check.
			}
			// Pitfall 2: never report a grant while the lease is in doubt.
			if err := s.waitCertain(ctx); err != nil {
				return m.giveUp(ctx, caller, s, node, err)
			}
		} else {
			// Second net: the cell re-sends events until acknowledged, but a
			// waiter that hears nothing of its predecessor for a lease
			// re-lists rather than wait forever on a lock that may be free.
			silence := time.NewTimer(s.Lease())
			select {
			case ev := <-ch:
				silence.Stop()
				if ev.Type == EventSessionExpired || ev.Type == EventSessionClosed {
					return m.waitErr(ctx, s, s.Err())
				}
				m.wakeups.Add(1)
				floor = max(floor, ev.Index)
			case <-silence.C:
				s.dropWatch(ch) // the re-list arms a fresh one
				m.c.log.Debug("lock waiter heard nothing for a lease; re-listing", "node", node)
			case <-s.Done():
				return m.waitErr(ctx, s, s.Err())
			case <-ctx.Done():
				return m.giveUp(ctx, caller, s, node, ctx.Err())
			}
		}
		if held && ch != nil {
			s.dropWatch(ch) // the re-list arms a fresh own-node watch
		}
		// Re-list after every wake-up, never assume: the predecessor may
		// have been a waiter that gave up.
		var st api.LockStateResponse
		st, ch, lc, err = m.relist(ctx, s, node, floor)
		if err != nil {
			return m.giveUp(ctx, caller, s, node, err)
		}
		if !st.Exists {
			return recipeErr(codeLockLost, s.Err(), "lock %s: node %s was deleted while it waited", m.path, node)
		}
		held, token, floor, version = st.Held, st.Token, st.Index, st.Version
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
	g := &grant{s: s, node: node, token: token, version: version, done: make(chan struct{}), base: lc, changed: make(chan struct{})}
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

// monitor follows a grant until it ends: deletion of the node (by anyone)
// or the session's end loses the lock; after the session is safe again
// the node is re-checked with LockState before Context is live again.
func (m *Mutex) monitor(g *grant, nodeCh <-chan api.Event) {
	defer close(g.done)
	s := g.s
	retryTimer := time.NewTimer(time.Hour)
	retryTimer.Stop()
	defer retryTimer.Stop()
	var retry <-chan time.Time // set while a failed re-check waits to be tried again
	for attempt := 0; ; {
		if nodeCh == nil {
			gr, ch, err := s.getW(g.ctx, g.node)
			switch {
			case g.ctx.Err() != nil:
				m.sessionEnded(g)
				return
			case sessionGone(err) || errors.Is(err, ErrClosed):
				m.lose(g, err, "its session ended")
				return
			case nodeMovedAway(err) && !brokenMovedAway:
				m.lose(g, err, "its prefix moved to another cell (the seal deleted its node)")
				return
			case err != nil:
				sleepCtx(g.ctx, backoff(attempt))
				attempt++
				continue
			case !gr.Exists:
				m.lose(g, nil, "its node was deleted")
				return
			}
			attempt, nodeCh = 0, ch
		}
		changed := s.LeaseChanged()
		if retry == nil {
			if lc := m.recheckDue(g); lc != nil && !m.recheck(g, lc) {
				retryTimer.Reset(backoff(attempt))
				attempt++
				retry = retryTimer.C
			}
		}
		select {
		case <-g.ctx.Done():
			m.sessionEnded(g)
			return
		case ev := <-nodeCh:
			nodeCh = nil
			switch ev.Type {
			case api.EventDeleted:
				m.lose(g, nil, "its node was deleted")
				return
			case EventSessionExpired, EventSessionClosed:
				m.lose(g, s.Err(), "its session ended")
				return
			}
			// A data change (Proclaim) or a resync: re-read and re-arm.
		case <-changed:
		case <-retry:
			retry = nil
		}
	}
}

// recheckDue returns the session's LeaseContext if the lease is certain
// again after jeopardy and the grant has not been re-checked under it.
func (m *Mutex) recheckDue(g *grant) context.Context {
	lc := g.s.LeaseContext()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !g.activeLocked() || lc == g.base || !g.s.certain(lc) {
		return nil
	}
	return lc
}

// recheck confirms with LockState that the node still holds (pitfall 7)
// and, if so, makes Context live again under lc. It reports false if it
// should be tried again.
func (m *Mutex) recheck(g *grant, lc context.Context) bool {
	st, _, err := g.s.lockState(g.ctx, g.node, false)
	if err != nil {
		if g.ctx.Err() != nil {
			return true
		}
		if sessionGone(err) || errors.Is(err, ErrClosed) {
			m.lose(g, err, "its session ended")
			return true
		}
		if nodeMovedAway(err) && !brokenMovedAway {
			m.lose(g, err, "its prefix moved to another cell (the seal deleted its node)")
			return true
		}
		m.c.log.Warn("lock re-check after jeopardy failed", "node", g.node, "err", err)
		return false
	}
	if !st.Exists || !st.Held || st.Token != g.token {
		m.lose(g, nil, "its node no longer holds after jeopardy")
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !g.activeLocked() || g.s.LeaseContext() != lc || !g.s.certain(lc) {
		return true // back in doubt already: the next change re-checks
	}
	g.liveCancel()
	g.base = lc
	g.live, g.liveCancel = context.WithCancel(lc)
	g.signalLocked()
	return true
}

// sessionEnded records a loss if the grant's context ended with its session.
func (m *Mutex) sessionEnded(g *grant) {
	if err := g.s.Err(); err != nil {
		m.lose(g, err, "its session ended")
	}
}

// lose marks the grant lost (unless it was released or already lost).
func (m *Mutex) lose(g *grant, cause error, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !g.activeLocked() {
		return
	}
	g.lost = recipeErr(codeLockLost, cause, "lock %s (node %s) lost: %s", m.path, g.node, why)
	g.liveCancel()
	g.cancel()
	g.signalLocked()
	m.c.log.Warn("lock lost", "path", m.path, "node", g.node, "why", why)
}

// Unlock releases the lock: Context is cancelled at once and the node is
// deleted, which wakes the next waiter. If the delete's outcome is unknown
// (ctx ended, cell unreachable) the error is returned and the delete goes
// on in the background while the session lives. Unlock returns an error
// matching ErrNotHeld if nothing is held, and one matching both ErrNotHeld
// and ErrLockLost if the lock had been lost.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	g := m.g
	if g == nil || g.released {
		m.mu.Unlock()
		return recipeErr(codeNotHeld, nil, "mutex %s is not held", m.path)
	}
	lost := g.lost
	if err := g.s.Err(); lost == nil && err != nil && !errors.Is(err, ErrClosed) {
		// The session ended (expired, or given up after the grace period)
		// before the monitor recorded the loss: the lock is lost, and no
		// delete is sent (the cell may be unreachable).
		lost = recipeErr(codeLockLost, err, "lock %s (node %s) lost: its session ended", m.path, g.node)
	}
	g.released = true
	m.g = nil
	g.liveCancel()
	g.cancel()
	g.signalLocked()
	m.mu.Unlock()
	<-g.done

	if lost != nil {
		if g.s.Err() == nil {
			g.s.cleanup(ctx, cleanupTask{path: g.node}) // in case it exists yet no longer holds
		}
		return recipeErr(codeNotHeld, lost, "mutex %s", m.path)
	}
	req := api.DeleteRequest{Path: g.node}
	var resp api.WriteResponse
	err := g.s.write(ctx, &req.WriteHeader, api.RouteDelete, &req, &resp)
	switch {
	case err == nil || api.CodeOf(err) == api.CodeNoNode:
		return nil
	case errors.Is(err, ErrClosed):
		return ErrClosed
	case sessionGone(err):
		lost := recipeErr(codeLockLost, err, "lock %s lost: its session ended", m.path)
		return recipeErr(codeNotHeld, lost, "mutex %s", m.path)
	case unknownOutcome(err):
		g.s.deferCleanup(cleanupTask{path: g.node})
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

// current is the grant if the lock is held (possibly in doubt), else nil.
func (m *Mutex) current() *grant {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g := m.g; g != nil && g.activeLocked() && g.s.Err() == nil {
		return g
	}
	return nil
}

// Token is the fencing token of the current grant, 0 if not held. It stays
// the same through jeopardy and after SessionSafe.
func (m *Mutex) Token() uint64 {
	if g := m.current(); g != nil {
		return g.token
	}
	return 0
}

// Node is the path of the current grant's lock node, "" if not held.
func (m *Mutex) Node() string {
	if g := m.current(); g != nil {
		return g.node
	}
	return ""
}

// Held reports whether the lock is held: granted, not lost and not
// unlocked. A held lock may still be in doubt (session in jeopardy): act
// on it only while Context is live.
func (m *Mutex) Held() bool { return m.current() != nil }

// Wakeups counts the predecessor events that woke this Mutex while it
// waited, over all its Lock calls. With one watch per waiter on its
// predecessor it is one per release it waited through: a diagnostic for
// herd effects.
func (m *Mutex) Wakeups() int64 { return m.wakeups.Load() }

// Context is live while the lock is held and the session's lease is
// certain. It is cancelled the moment the session enters jeopardy, the
// lock is lost (session expired or closed, node deleted by anyone) or
// Unlock is called. After SessionSafe, once the node has been re-checked
// with LockState and still holds, a fresh call returns a live context
// again (same node, same token); a call made while that re-check is in
// flight waits for it (at most the request timeout). Without a grant it
// returns a cancelled context.
func (m *Mutex) Context() context.Context {
	var deadline time.Time
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		g := m.g
		if g == nil || !g.activeLocked() {
			return cancelledCtx
		}
		if g.live.Err() == nil {
			return g.live
		}
		lc := g.s.LeaseContext()
		if lc == g.base || !g.s.certain(lc) {
			return g.live // in doubt (or ended): cancelled
		}
		// Safe again, and the monitor's re-check is due or in flight.
		if deadline.IsZero() {
			deadline = time.Now().Add(m.c.timeout)
		}
		d := time.Until(deadline)
		if d <= 0 {
			return g.live
		}
		ch := g.changed
		m.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ch:
		case <-t.C:
		case <-g.ctx.Done():
		}
		t.Stop()
		m.mu.Lock()
	}
}

// waitLive blocks until the held grant's Context is live (nil), the grant
// is lost or released (an error), or ctx ends.
func (m *Mutex) waitLive(ctx context.Context) error {
	for {
		m.mu.Lock()
		g := m.g
		if g == nil || g.released {
			m.mu.Unlock()
			return recipeErr(codeNotHeld, nil, "mutex %s is not held", m.path)
		}
		if g.lost != nil {
			err := g.lost
			m.mu.Unlock()
			return err
		}
		changed := g.changed
		m.mu.Unlock()
		leaseChanged := g.s.LeaseChanged()
		if m.Context().Err() == nil {
			return nil
		}
		select {
		case <-changed:
		case <-leaseChanged:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// setValue writes the held node's value, conditional on its version so a
// node that is gone is never re-created as a persistent one.
func (m *Mutex) setValue(ctx context.Context, value []byte) error {
	m.mu.Lock()
	g := m.g
	switch {
	case g == nil || g.released:
		m.mu.Unlock()
		return recipeErr(codeNotHeld, nil, "%s is not held", m.path)
	case g.lost != nil:
		err := g.lost
		m.mu.Unlock()
		return recipeErr(codeNotHeld, err, "%s", m.path)
	case g.live.Err() != nil:
		m.mu.Unlock()
		return recipeErr(codeNotHeld, nil, "%s is in doubt: the session is in jeopardy", m.path)
	}
	version := g.version
	m.mu.Unlock()
	if value == nil {
		value = []byte{}
	}
	for attempt := 0; ; attempt++ {
		req := api.PutRequest{Path: g.node, Value: value, Version: &version}
		var resp api.WriteResponse
		err := g.s.write(ctx, &req.WriteHeader, api.RoutePut, &req, &resp)
		switch {
		case err == nil:
			m.mu.Lock()
			g.version = max(g.version, resp.Node.Version)
			m.value = value
			m.mu.Unlock()
			return nil
		case api.CodeOf(err) == api.CodeNoNode:
			m.lose(g, nil, "its node was deleted")
			return recipeErr(codeLockLost, err, "%s", m.path)
		case sessionGone(err):
			m.lose(g, err, "its session ended")
			return recipeErr(codeLockLost, err, "%s", m.path)
		case api.CodeOf(err) == api.CodeVersionMismatch && attempt == 0:
			// An earlier write whose reply was lost may have applied:
			// adopt the node's version if it is still ours.
			n, gerr := m.c.Get(ctx, g.node)
			if errors.Is(gerr, ErrNoNode) || (gerr == nil && n.Owner != g.s.id) {
				m.lose(g, nil, "its node was deleted")
				return recipeErr(codeLockLost, gerr, "%s", m.path)
			}
			if gerr != nil {
				return gerr
			}
			version = n.Version
		default:
			return err
		}
	}
}
