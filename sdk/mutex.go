package sdk

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
)

// Errors of the lock, election and membership recipes. They are *api.Error
// values with codes of their own, so errors.Is matches them and lockctl
// prints their code.
var (
	// ErrLockTimeout: TryLock did not get the lock in time (and left no node behind).
	ErrLockTimeout = &api.Error{Code: "lock_timeout", Message: "lock not acquired in time"}
	// ErrLockLost: the lock's node or its session is gone.
	ErrLockLost = &api.Error{Code: "lock_lost", Message: "lock lost: its node or session is gone"}
	// ErrNotHeld: Unlock or Resign of something not held.
	ErrNotHeld = &api.Error{Code: "not_held", Message: "not held"}
	// ErrNoLeader: nobody leads the election.
	ErrNoLeader = &api.Error{Code: "no_leader", Message: "no leader"}
)

// createBound bounds the lock node's create when the caller's context ends
// first: the create is finished (retried with the same request id) so the
// node's name is known and it can be deleted, never left behind.
const createBound = 30 * time.Second

// LockOption configures a Mutex.
type LockOption func(*Mutex)

// Shared makes the Mutex a shared (read) lock: it is held together with
// other shared holders and excludes exclusive ones.
func Shared() LockOption { return func(m *Mutex) { m.mode = api.LockShared } }

// lockValue stores value in the lock node (used by elections).
func lockValue(v []byte) LockOption { return func(m *Mutex) { m.value = v } }

// Mutex is a distributed lock at a path, built from ephemeral sequential
// nodes: Lock creates a node under the path, waits only for the deletion of
// the node it must follow, and re-checks on every wake-up. The grant
// carries a fencing token (Token) that only goes up; send it with every
// write to the protected resource (see package sdk/fence). A Mutex is
// used by one holder at a time; it may be locked again after Unlock.
type Mutex struct {
	c     *Client
	path  string
	mode  api.LockMode
	value []byte

	wakeups atomic.Int64 // predecessor events that woke a waiter (tests, metrics)

	mu     sync.Mutex
	node   string
	token  uint64
	sess   *Session
	held   bool
	lost   bool
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}
}

// NewMutex returns an exclusive lock at path (Shared() for a read lock).
func (c *Client) NewMutex(path string, opts ...LockOption) *Mutex {
	m := &Mutex{c: c, path: path, mode: api.LockExclusive}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Lock blocks until the lock is held, or ctx ends (its node is then
// deleted and ctx's error returned).
func (m *Mutex) Lock(ctx context.Context) error { return m.acquire(ctx, 0) }

// TryLock is Lock that gives up after timeout with ErrLockTimeout, leaving
// no node behind.
func (m *Mutex) TryLock(ctx context.Context, timeout time.Duration) error {
	if timeout <= 0 {
		return api.Errorf(api.CodeBadRequest, "TryLock needs a positive timeout")
	}
	return m.acquire(ctx, timeout)
}

func (m *Mutex) acquire(ctx context.Context, timeout time.Duration) error {
	m.mu.Lock()
	if m.node != "" {
		m.mu.Unlock()
		return api.Errorf(api.CodeBadRequest, "mutex %s is already held or being acquired", m.path)
	}
	m.lost = false
	m.mu.Unlock()

	waitCtx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		waitCtx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()

	// The create runs to completion even if ctx ends: a lost reply is
	// retried with the same request id, which names the node the first
	// attempt made (pitfall: orphan lock nodes).
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), createBound)
	resp, ch, s, err := m.c.createLockNode(cctx, m.path, m.mode, m.value)
	ccancel()
	if err != nil {
		return err
	}
	node := resp.Node.Path
	fail := func(err error) error {
		m.deleteNode(node)
		if errors.Is(err, context.DeadlineExceeded) && timeout > 0 && ctx.Err() == nil {
			return ErrLockTimeout
		}
		return err
	}
	held, token := resp.WaitFor == "", resp.Token
	for {
		if held {
			// Report a grant only while the lease is certain: a waiter whose
			// lease ran out while it waited must not act (etcd #11456).
			if !s.InJeopardy() {
				return m.granted(node, token, s)
			}
			select {
			case <-s.LeaseChanged():
			case <-s.Done():
				return ErrLockLost
			case <-waitCtx.Done():
				return fail(waitCtx.Err())
			}
		} else {
			select {
			case ev, ok := <-ch:
				if ok && (ev.Type == EventSessionExpired || ev.Type == EventSessionClosed) {
					return ErrLockLost
				}
				m.wakeups.Add(1)
			case <-s.Done():
				return ErrLockLost
			case <-waitCtx.Done():
				return fail(waitCtx.Err())
			}
		}
		// Re-list after every wake-up, never assume: the predecessor may
		// have been a waiter that gave up. The read is linearizable, so it
		// is at least as new as the event that woke us.
		st, next, err := m.c.LockState(waitCtx, node, true)
		if err != nil {
			if sessionGone(err) {
				return ErrLockLost
			}
			return fail(err)
		}
		if !st.Exists {
			return ErrLockLost
		}
		held, token, ch = st.Held, st.Token, next
	}
}

func (m *Mutex) granted(node string, token uint64, s *Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.node, m.token, m.sess, m.held = node, token, s, true
	m.ctx, m.cancel = context.WithCancel(s.LeaseContext())
	m.stop = make(chan struct{})
	m.c.bg.Add(1)
	go m.monitor(node, m.stop)
	return nil
}

// monitor watches the held node: its deletion (by anyone) or the session's
// end means the lock is lost.
func (m *Mutex) monitor(node string, stop chan struct{}) {
	defer m.c.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
		case <-m.c.ctx.Done():
		}
		cancel()
	}()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		_, exists, ch, err := m.c.GetW(ctx, node)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if sessionGone(err) || errors.Is(err, ErrClosed) {
				m.markLost(stop)
				return
			}
			sleepCtx(ctx, backoff(attempt))
			continue
		}
		if !exists {
			m.markLost(stop)
			return
		}
		select {
		case ev := <-ch:
			switch ev.Type {
			case EventSessionExpired, EventSessionClosed:
				m.markLost(stop)
				return
			case api.EventDeleted:
				// Confirm with a linearizable read before declaring the loss.
				if _, err := m.c.Get(ctx, node); errors.Is(err, ErrNoNode) || sessionGone(err) {
					m.markLost(stop)
					return
				}
			}
			attempt = 0 // data change or resync: re-arm
		case <-ctx.Done():
			return
		}
	}
}

func (m *Mutex) markLost(stop chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stop != stop || !m.held {
		return
	}
	m.held, m.lost = false, true
	m.cancel()
}

// deleteNode removes a node this Mutex created, retried under a bounded
// detached context; a node already gone is fine.
func (m *Mutex) deleteNode(node string) error {
	ctx, cancel := context.WithTimeout(context.Background(), createBound)
	defer cancel()
	err := m.c.Delete(ctx, node)
	if errors.Is(err, ErrNoNode) || sessionGone(err) {
		return nil
	}
	return err
}

// Unlock releases the lock: it deletes the node, which wakes the next
// waiter. It returns ErrLockLost if the lock had been lost, ErrNotHeld if
// it was not held.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	node, wasLost := m.node, m.lost
	if node == "" {
		m.mu.Unlock()
		return ErrNotHeld
	}
	close(m.stop)
	m.cancel()
	m.node, m.token, m.held, m.sess = "", 0, false, nil
	m.mu.Unlock()
	err := m.c.Delete(ctx, node)
	if errors.Is(err, ErrNoNode) || sessionGone(err) {
		err = nil
	}
	if err == nil && wasLost {
		return ErrLockLost
	}
	return err
}

// Token is the fencing token of the current grant, 0 if not held.
func (m *Mutex) Token() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.held {
		return 0
	}
	return m.token
}

// Node is the path of the lock node of the current grant.
func (m *Mutex) Node() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.node
}

// Held reports whether the lock is held and not lost. A held lock may
// still be in doubt: act only under Context.
func (m *Mutex) Held() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

// Wakeups counts the predecessor events that woke this Mutex while it
// waited. With the recipe's one-watch-per-waiter it is one per handoff it
// waited through.
func (m *Mutex) Wakeups() int64 { return m.wakeups.Load() }

// Context is live while the lock is held and its session's lease is
// certain. It is cancelled the moment the session enters jeopardy, the lock
// is lost (session expired, node deleted) or Unlock is called. After the
// session is safe again, Context returns a fresh live context: the same
// node still holds, with the same token. Stop acting on the lock when it is
// done.
func (m *Mutex) Context() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.held {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	if m.ctx.Err() != nil && !m.sess.InJeopardy() && m.sess.Err() == nil {
		// Safe again: the session (and so the node, which only its deletion
		// could remove, watched by monitor) survived.
		m.ctx, m.cancel = context.WithCancel(m.sess.LeaseContext())
	}
	return m.ctx
}
