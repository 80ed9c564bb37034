package sdk

import (
	"context"
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
	// permits is a Semaphore's N (mode api.LockPermit), 0 otherwise.
	permits int

	wakeups atomic.Int64 // predecessor events that woke this Mutex while it waited
	relists atomic.Int64 // LockState re-lists while waiting
	unheard atomic.Int64 // predecessors found gone by a re-list after a lease of silence

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
	mode       api.LockMode // the node's mode now (Downgrade and Upgrade change it: rwlock.go)
	upgrading  bool         // an Upgrade is waiting: Context is over, no re-check loses the grant
	version    uint64       // the node's data version (Proclaim is conditional on it)
	lost       error        // set once the lock is lost
	released   bool         // Unlock was called
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

// Unheard counts the predecessors this Mutex saw go without hearing their
// event (a release, or a waiter ahead giving up, as Wakeups counts them):
// its re-list after a lease of silence (the recipe's second net) found
// the predecessor gone. Rare and harmless when the event and the re-list
// crossed; a count that keeps rising means events are lost (the waiter
// then takes each release a lease late), and is worth a report. Each is
// also logged at info.
func (m *Mutex) Unheard() int64 { return m.unheard.Load() }
