package sdk

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
)

// SessionEventType is what happened to a session.
type SessionEventType string

const (
	// SessionFailover: the cell changed leader (its epoch changed). The
	// session survives; its watches are being re-registered on the new
	// leader.
	SessionFailover SessionEventType = "failover"
	// SessionExpired: the cell ended the session, or the grace period ran
	// out in jeopardy. Its ephemeral nodes and locks are gone (or must be
	// assumed gone) and its watches have failed. It is the last event; the
	// channel is closed after it.
	SessionExpired SessionEventType = "expired"
	// SessionJeopardy: the local lease ran out without a confirmed
	// KeepAlive. The session may still hold its locks, or the cell may
	// already have freed them: stop acting on them now. Every lock's and
	// the session's LeaseContext are cancelled. The client keeps trying
	// every endpoint for the grace period, then reports Safe or Expired.
	SessionJeopardy SessionEventType = "jeopardy"
	// SessionSafe: after jeopardy, the cell confirmed the session again. It
	// holds the same locks with the same tokens; a fresh LeaseContext is
	// available.
	SessionSafe SessionEventType = "safe"
)

// SessionEvent is a session-level event, delivered on Session.Events.
type SessionEvent struct {
	Type    SessionEventType
	Cell    string
	Session uint64
	// Epoch is the cell's leader epoch as of the event.
	Epoch uint64
	// Err says why, for SessionExpired.
	Err error
	// Time is when the client observed the event.
	Time time.Time
}

// Event types the SDK itself puts on watch channels; the server never
// sends them. A watch channel carries one of them, then closes, when its
// session ends before the watch fires.
const (
	// EventSessionExpired: the session expired; re-read (on a new session)
	// to learn the node's state.
	EventSessionExpired api.EventType = "session_expired"
	// EventSessionClosed: the session or client was closed.
	EventSessionClosed api.EventType = "session_closed"
)

const (
	// sessionEventBuffer is the capacity of Session.Events; when a reader
	// falls behind, the oldest event is dropped to make room.
	sessionEventBuffer = 16
	// minKeepAliveGap spaces KeepAlives whose replies come back early and
	// empty, so a server that does not hold the long-poll is not flooded.
	minKeepAliveGap = 50 * time.Millisecond
	// keepAliveErrorPause is the pause after a KeepAlive round that failed
	// at once with a non-retryable error.
	keepAliveErrorPause = 250 * time.Millisecond
)

// Session is a client's session on one cell: a lease the cell keeps alive
// while KeepAlives arrive, the owner of ephemeral nodes and locks, and the
// channel watch events arrive on. Get one from Client.Session, or let the
// client open one when a call needs it. It is safe for concurrent use.
type Session struct {
	c  *Client
	cs *cellState
	id uint64
	// secret is sent with every request naming the session (the cell
	// refuses the id alone: ids are guessable).
	secret string
	log    *slog.Logger
	reqs   reqTracker

	lease time.Duration // granted by the cell
	wait  time.Duration // KeepAlive long-poll: lease/3

	ctx    context.Context // ends when the session ends or the client closes
	cancel context.CancelFunc
	grace  time.Duration
	wg     sync.WaitGroup // keepAliveLoop, rearmLoop
	rearm  chan struct{}  // cap 1: watches are dirty

	mu sync.Mutex
	// epoch is the cell's leader epoch last seen; gen counts fail-overs.
	epoch uint64
	gen   uint64
	// lastConfirmedSend is the send time (monotonic) of the latest
	// KeepAlive (or the open) the cell answered: the cell's lease runs at
	// least lease from it. The local lease clock is built on it.
	lastConfirmedSend time.Time
	index             uint64 // highest cell index seen in a session reply
	err               error  // set once the session has ended
	// Local lease: leaseCtx is live while the lease is certain, cancelled
	// on jeopardy and on end; jeopardySince is set while in jeopardy.
	leaseCtx      context.Context
	leaseCancel   context.CancelFunc
	jeopardySince time.Time
	confirmedSig  chan struct{} // cap 1: the watchdog re-reads the lease
	leaseChanged  chan struct{} // closed (and replaced) on jeopardy, safe and end
	// cleanups are nodes (or creates whose outcome is unknown) that a
	// recipe gave up on and could not remove at once; cleanupLoop removes
	// them while the session lives.
	cleanups   []cleanupTask
	cleanupSig chan struct{} // cap 1
	w          watchSet
	cache      cacheState
	// proxy is the lockproxy instance the session's KeepAlives last went
	// through ("" direct); proxyCacheUntil is when its grant to serve
	// the values it made cacheable ends.
	proxy           string
	proxyCacheUntil time.Time
	ackKick         chan struct{} // cap 1: a held acknowledgement was released (for ackLoop)
	released        chan struct{} // cap 1: the same, for the KeepAlive loop
	heldWait        bool          // the KeepAlive loop waits for a release
	renewSoon       bool          // a cacheable read went out on the lease's poll (for ackLoop)
	cacheReadAt     time.Time     // the last cacheable read's send
	sentAck         [2]uint64     // the last acknowledgement sent (epoch, seq)
	events          chan SessionEvent
	done            chan struct{}
	tel             telemetry // Stats' counters (telemetry.go)
}

// openSession asks the cell for a session and starts its goroutines.
func (c *Client) openSession(ctx context.Context, cs *cellState) (*Session, error) {
	var resp api.SessionResponse
	cl := &call{
		route:       api.RouteSessionOpen,
		req:         api.OpenSessionRequest{Cell: cs.name, LeaseMS: c.cfg.Lease.Milliseconds(), Nonce: rand.Text()},
		resp:        &resp,
		retryUnsure: true, // one random nonce per logical open: a retry gets the session the first attempt opened
	}
	if err := c.do(ctx, cs, cl); err != nil {
		return nil, err
	}
	lease := time.Duration(resp.LeaseMS) * time.Millisecond
	if lease <= 0 {
		lease = c.cfg.Lease
	}
	if lease <= 0 {
		lease = api.DefaultLease
	}
	s := &Session{
		c:      c,
		cs:     cs,
		id:     resp.Session,
		secret: resp.Secret,
		log:    c.log.With("cell", cs.name, "session", resp.Session),
		lease:  lease,
		wait:   keepAliveWait(lease, resp.KeepAliveMS),
		rearm:  make(chan struct{}, 1),
		epoch:  resp.Epoch,
		// The lease began when the open applied, which may have been an
		// earlier attempt than the one answered (the retry is answered
		// from the nonce window): count from the first send.
		lastConfirmedSend: cl.firstSent,
		tel:               telemetry{confirmedAt: time.Now()}, // the open confirms the lease
		index:             resp.Index,
		events:            make(chan SessionEvent, sessionEventBuffer),
		done:              make(chan struct{}),
		grace:             c.cfg.graceFor(lease, resp.GraceMS),
		confirmedSig:      make(chan struct{}, 1),
		leaseChanged:      make(chan struct{}),
		cleanupSig:        make(chan struct{}, 1),
		ackKick:           make(chan struct{}, 1),
		released:          make(chan struct{}, 1),
	}
	s.reqs.init()
	s.w.init()
	s.cache.entries = map[string]api.GetResponse{}
	s.ctx, s.cancel = context.WithCancel(c.ctx)
	s.leaseCtx, s.leaseCancel = context.WithCancel(s.ctx)
	s.wg.Add(5)
	c.bg.Add(5)
	go s.ackLoop()
	go s.keepAliveLoop()
	go s.rearmLoop()
	go s.leaseWatchdog()
	go s.cleanupLoop()
	s.log.Debug("session opened", "lease", lease, "epoch", resp.Epoch)
	return s, nil
}

// ID is the session id the cell assigned.
func (s *Session) ID() uint64 { return s.id }

// Cell is the name of the session's cell.
func (s *Session) Cell() string { return s.cs.name }

// Lease is the lease length the cell granted.
func (s *Session) Lease() time.Duration { return s.lease }

// Grace is how long the session, once in jeopardy, keeps trying before it
// is given up as expired (Config.Grace, else its cell's, else scaled to
// the lease).
func (s *Session) Grace() time.Duration { return s.grace }

// KeepAliveInterval is how often the session renews its lease: its cell's
// interval, else a third of the lease.
func (s *Session) KeepAliveInterval() time.Duration { return s.wait }

// Proxy names the lockproxy instance the session's KeepAlives last went
// through ("" when they go to the cell's replicas).
func (s *Session) Proxy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proxy
}

// Epoch is the cell's leader epoch as last seen by the session.
func (s *Session) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// Events delivers session-level events. It is buffered; if the reader
// falls behind, the oldest events are dropped. It is closed when the
// session ends (after SessionExpired, if it expired).
func (s *Session) Events() <-chan SessionEvent { return s.events }

// Done is closed when the session has ended: expired, closed, or its
// client closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is nil while the session lives, then why it ended: an
// ErrSessionExpired (or ErrNoSession) *api.Error, or ErrClosed.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Session) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil
}

// Close ends the session: it stops the KeepAlives, tells the cell (which
// deletes the session's ephemeral nodes and frees its locks), and fails
// its watches with EventSessionClosed. The client opens a new session
// the next time one is needed.
func (s *Session) Close(ctx context.Context) error {
	return s.close(ctx, false)
}

func (s *Session) close(ctx context.Context, duringClose bool) error {
	s.mu.Lock()
	ended := s.err != nil
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	if ended {
		return nil
	}
	err := s.c.do(ctx, s.cs, &call{
		route:       api.RouteSessionClose,
		req:         api.CloseSessionRequest{Cell: s.cs.name, Session: s.id, Secret: s.secret},
		retryUnsure: true,
		duringClose: duringClose,
	})
	if sessionGone(err) {
		err = nil
	}
	s.end(ErrClosed)
	return err
}

// expire ends the session because the cell says it is gone.
func (s *Session) expire(err error) { s.end(err) }

// end marks the session ended with err (ErrClosed, or the cell's
// session_expired/no_session error), fails its watches, reports
// SessionExpired unless it was closed, and closes Events and Done.
func (s *Session) end(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	marker := EventSessionClosed
	if err != ErrClosed {
		marker = EventSessionExpired
		s.emitLocked(SessionEvent{Type: SessionExpired, Err: err})
		s.log.Warn("session expired", "err", err)
	}
	s.w.failAll(marker)
	s.leaseCancel()
	s.signalLeaseLocked()
	close(s.events)
	close(s.done)
	s.mu.Unlock()
	s.cancel()
}

// emitLocked queues a session event, dropping the oldest if the buffer is full.
func (s *Session) emitLocked(ev SessionEvent) {
	ev.Cell, ev.Session, ev.Time = s.cs.name, s.id, time.Now()
	if ev.Epoch == 0 {
		ev.Epoch = s.epoch
	}
	for {
		select {
		case s.events <- ev:
			return
		default:
		}
		select {
		case <-s.events:
		default:
		}
	}
}

// sessionFor returns the cell's session: opened if need, else the live one or nil.
func (c *Client) sessionFor(ctx context.Context, cs *cellState, need bool) (*Session, error) {
	if need {
		return c.session(ctx, cs)
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	return c.liveSession(cs), nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
