package sdk

import (
	"context"
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
	c    *Client
	cs   *cellState
	id   uint64
	log  *slog.Logger
	reqs reqTracker

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
	events     chan SessionEvent
	done       chan struct{}
}

// openSession asks the cell for a session and starts its goroutines.
func (c *Client) openSession(ctx context.Context, cs *cellState) (*Session, error) {
	var resp api.SessionResponse
	cl := &call{
		route:       api.RouteSessionOpen,
		req:         api.OpenSessionRequest{Cell: cs.name, LeaseMS: c.cfg.Lease.Milliseconds()},
		resp:        &resp,
		retryUnsure: true, // a duplicate open only leaves an unused session to expire
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
		c:                 c,
		cs:                cs,
		id:                resp.Session,
		log:               c.log.With("cell", cs.name, "session", resp.Session),
		lease:             lease,
		wait:              min(lease/3, api.MaxKeepAliveWait),
		rearm:             make(chan struct{}, 1),
		epoch:             resp.Epoch,
		lastConfirmedSend: cl.sent,
		index:             resp.Index,
		events:            make(chan SessionEvent, sessionEventBuffer),
		done:              make(chan struct{}),
		grace:             c.cfg.grace(),
		confirmedSig:      make(chan struct{}, 1),
		leaseChanged:      make(chan struct{}),
		cleanupSig:        make(chan struct{}, 1),
	}
	s.reqs.init()
	s.w.init()
	s.ctx, s.cancel = context.WithCancel(c.ctx)
	s.leaseCtx, s.leaseCancel = context.WithCancel(s.ctx)
	s.wg.Add(4)
	c.bg.Add(4)
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

// LocalExpiry is when the client assumes its lease ends: the send time of
// the last KeepAlive the cell confirmed, plus the lease, less DriftMargin.
// The cell's own expiry is never earlier.
func (s *Session) LocalExpiry() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.localExpiryLocked()
}

func (s *Session) localExpiryLocked() time.Time {
	return s.lastConfirmedSend.Add(s.lease - DriftMargin(s.lease))
}

// InJeopardy reports whether the lease is in doubt right now.
func (s *Session) InJeopardy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.jeopardySince.IsZero() || (s.err == nil && !time.Now().Before(s.localExpiryLocked()))
}

// LeaseContext is a context that is live while the session's lease is
// certain: it is cancelled the moment the session enters jeopardy or ends.
// After SessionSafe, call LeaseContext again for a fresh one. Work that
// needs the session's locks should run under it.
func (s *Session) LeaseContext() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaseCtx
}

// LeaseChanged returns a channel closed at the next change of the lease's
// state: entering jeopardy, becoming safe again, or the session ending.
func (s *Session) LeaseChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaseChanged
}

// certain reports whether lc (a LeaseContext of s) is live and the lease
// is not in doubt right now: the condition for reporting or restoring a
// grant.
func (s *Session) certain(lc context.Context) bool {
	return lc.Err() == nil && !s.InJeopardy()
}

// waitCertain blocks until the session's lease is certain, returning nil;
// or returns the session's error once it ends, or ctx's.
func (s *Session) waitCertain(ctx context.Context) error {
	for {
		changed := s.LeaseChanged()
		if s.certain(s.LeaseContext()) {
			return nil
		}
		if err := s.Err(); err != nil {
			return err
		}
		// The local lease may have run out just now with the watchdog yet
		// to notice (it then signals changed), or a confirmation may
		// arrive first (which signals nothing): look again shortly.
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-changed:
		case <-s.done:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

func (s *Session) signalLeaseLocked() {
	close(s.leaseChanged)
	s.leaseChanged = make(chan struct{})
}

// leaseWatchdog runs the local lease clock: it enters jeopardy when the local
// lease runs out without a newer confirmation, and gives the session up
// when the grace period runs out. The check uses the monotonic clock.
func (s *Session) leaseWatchdog() {
	defer s.c.bg.Done()
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if s.err != nil {
			s.mu.Unlock()
			return
		}
		now := time.Now()
		var next time.Time
		if s.jeopardySince.IsZero() {
			next = s.localExpiryLocked()
			if !now.Before(next) {
				s.jeopardySince = now
				s.leaseCancel()
				s.signalLeaseLocked()
				s.emitLocked(SessionEvent{Type: SessionJeopardy})
				s.log.Warn("session in jeopardy: local lease ran out", "last_confirmed_send", s.lastConfirmedSend)
				next = now.Add(s.grace)
			}
		} else {
			next = s.jeopardySince.Add(s.grace)
			if !now.Before(next) {
				s.mu.Unlock()
				s.expire(api.Errorf(api.CodeSessionExpired, "session %d: no confirmation within the %v grace period", s.id, s.grace))
				return
			}
		}
		s.mu.Unlock()
		timer.Reset(time.Until(next))
		select {
		case <-s.ctx.Done():
			return
		case <-timer.C:
		case <-s.confirmedSig:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// leaseBasis is what the local lease clock starts from: the send time of
// the last KeepAlive the cell confirmed, and the lease length.
func (s *Session) leaseBasis() (lastConfirmedSend time.Time, lease time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastConfirmedSend, s.lease
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
		req:         api.CloseSessionRequest{Cell: s.cs.name, Session: s.id},
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

// keepAliveLoop renews the lease: a long-poll KeepAlive with wait_ms =
// lease/3 on the KeepAlive connection pool, the next sent as soon as the
// previous returns (so one reaches the cell at least every lease/3). Each reply confirms the lease from the request's send
// time, may carry watch events, and reveals fail-over by a new epoch.
func (s *Session) keepAliveLoop() {
	defer s.c.bg.Done()
	defer s.wg.Done()
	req := api.KeepAliveRequest{Cell: s.cs.name, Session: s.id}
	// An attempt may take the whole long-poll plus a margin for the reply.
	attempt := s.wait + max(s.lease/6, 500*time.Millisecond)
	for s.ctx.Err() == nil {
		var resp api.SessionResponse
		cl := &call{
			route:       api.RouteSessionKeepAlive,
			req:         &req,
			resp:        &resp,
			keepAlive:   true,
			timeout:     attempt,
			retryUnsure: true,
		}
		// A resent KeepAlive (after a redirect or a failure) asks for an
		// immediate reply: the lease confirmation, and the epoch of a
		// possible new leader, are wanted now, not after a long-poll.
		cl.before = func() {
			req.WaitMS = s.wait.Milliseconds()
			if cl.attempts > 0 {
				req.WaitMS = 0
			}
		}
		// Bound a round by the lease so the loop regains control (and can
		// judge the lease) even while no replica answers.
		rctx, cancel := context.WithTimeout(s.ctx, s.lease)
		err := s.c.do(rctx, s.cs, cl)
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		if err != nil {
			if sessionGone(err) {
				s.expire(err)
				return
			}
			s.log.Warn("keepalive failed", "err", err, "attempts", cl.attempts)
			if cl.attempts <= 1 {
				sleepCtx(s.ctx, keepAliveErrorPause)
			}
			continue
		}
		s.confirmed(cl.sent, &resp)
		if len(resp.Events) == 0 {
			if d := time.Since(cl.sent); d < minKeepAliveGap {
				sleepCtx(s.ctx, minKeepAliveGap-d)
			}
		}
	}
}

// confirmed applies a KeepAlive reply to the session.
func (s *Session) confirmed(sent time.Time, resp *api.SessionResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	if sent.After(s.lastConfirmedSend) {
		s.lastConfirmedSend = sent
	}
	if !s.jeopardySince.IsZero() && time.Now().Before(s.localExpiryLocked()) {
		// Confirmed again within the grace period: same session, same
		// locks and tokens.
		s.log.Info("session safe again", "jeopardy_for", time.Since(s.jeopardySince))
		s.jeopardySince = time.Time{}
		s.leaseCtx, s.leaseCancel = context.WithCancel(s.ctx)
		s.signalLeaseLocked()
		s.emitLocked(SessionEvent{Type: SessionSafe})
	}
	select {
	case s.confirmedSig <- struct{}{}:
	default:
	}
	s.index = max(s.index, resp.Index)
	rearm := s.w.dispatch(resp.Events)
	if resp.Epoch != 0 && resp.Epoch != s.epoch {
		s.log.Info("cell fail-over", "old_epoch", s.epoch, "epoch", resp.Epoch)
		s.epoch = resp.Epoch
		s.gen++
		// The new leader holds none of the old one's in-memory watches.
		if s.w.markAllDirty() {
			rearm = true
		}
		s.emitLocked(SessionEvent{Type: SessionFailover, Epoch: resp.Epoch})
	}
	if rearm {
		s.signalRearm()
	}
}

func (s *Session) signalRearm() {
	select {
	case s.rearm <- struct{}{}:
	default:
	}
}

// rearmLoop re-registers dirty watches with /v1/watch, each with the index
// it was armed at, so the cell fires at once any the session missed.
func (s *Session) rearmLoop() {
	defer s.c.bg.Done()
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.rearm:
		}
		s.mu.Lock()
		specs := s.w.takeDirty()
		s.mu.Unlock()
		for len(specs) > 0 {
			n := min(len(specs), api.MaxWatchesPerCall)
			chunk := specs[:n]
			specs = specs[n:]
			var resp api.WatchResponse
			err := s.c.do(s.ctx, s.cs, &call{
				route:       api.RouteWatch,
				req:         api.WatchRequest{Cell: s.cs.name, Session: s.id, Watches: chunk},
				resp:        &resp,
				retryUnsure: true, // registering a watch twice is harmless
			})
			switch {
			case err == nil:
			case s.ctx.Err() != nil:
				return
			case sessionGone(err):
				s.expire(err)
				return
			default:
				// The cell refused: tell the watchers to re-read rather
				// than leave them waiting on a watch nobody holds.
				s.log.Warn("watch re-registration failed", "err", err, "watches", len(chunk))
				s.mu.Lock()
				s.w.resyncSpecs(chunk)
				s.mu.Unlock()
			}
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

// reqTracker issues a session's request ids and computes acks. Ids start
// at 1 and grow; ack is the lowest id still outstanding. A new id is
// issued only while it stays within api.MaxSessionRequestWindow of the
// lowest outstanding one, so the cell still holds the result of every id a
// retry may resend.
type reqTracker struct {
	mu       sync.Mutex
	last     uint64 // last id issued
	low      uint64 // lowest outstanding id; 0 when none
	inflight map[uint64]struct{}
	wake     chan struct{} // closed (and replaced) when an id completes
}

func (t *reqTracker) init() {
	t.inflight = make(map[uint64]struct{})
	t.wake = make(chan struct{})
}

// begin issues the next id, waiting while the window is full.
func (t *reqTracker) begin(ctx context.Context) (uint64, error) {
	for {
		t.mu.Lock()
		if t.low == 0 || t.last+1-t.low < api.MaxSessionRequestWindow {
			t.last++
			id := t.last
			t.inflight[id] = struct{}{}
			if t.low == 0 {
				t.low = id
			}
			t.mu.Unlock()
			return id, nil
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, &gaveUpError{api.Errorf(api.CodeUnavailable, "session request window full: %v", ctx.Err()), ctx.Err()}
		}
	}
}

// ack is the lowest outstanding id (every id below it has had its reply);
// with nothing outstanding, the next id to be issued.
func (t *reqTracker) ack() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.low == 0 {
		return t.last + 1
	}
	return t.low
}

// end marks id as having had its reply (or been given up on).
func (t *reqTracker) end(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.inflight, id)
	if id == t.low {
		if len(t.inflight) == 0 {
			t.low = 0
		} else {
			for t.low++; t.low <= t.last; t.low++ {
				if _, ok := t.inflight[t.low]; ok {
					break
				}
			}
		}
	}
	close(t.wake)
	t.wake = make(chan struct{})
}

// cleanupTask is a node a recipe gave up on: path to delete, or, when a
// create's outcome is unknown (its reply was lost), the create itself to
// resend under its request id, whose reply names the node the first
// attempt made (pitfall 9), to be deleted in turn.
type cleanupTask struct {
	id     uint64             // request id of create; 0 once it has had a reply
	create *api.CreateRequest // nil: path is known
	path   string
}

// unknownOutcome reports whether a write that failed with err may still
// have been applied.
func unknownOutcome(err error) bool {
	return err != nil && api.CodeOf(err) == api.CodeUnavailable && !sessionGone(err)
}

// cleanupBudget bounds the attempt a recipe makes at once to remove a node
// it gives up on; past it the session's cleanup loop carries on.
func (s *Session) cleanupBudget() time.Duration { return s.c.timeout }

// cleanup removes t's node: at once, within cleanupBudget, and otherwise in
// the background for as long as the session lives (when it ends the cell
// deletes the node anyway). It reports whether the node is known to be
// gone on return. It takes over t.id: the caller must not end it.
func (s *Session) cleanup(t cleanupTask) bool {
	ctx, cancel := context.WithTimeout(s.ctx, s.cleanupBudget())
	err := s.runCleanup(ctx, &t)
	cancel()
	if err == nil {
		return true
	}
	if s.ctx.Err() != nil {
		return false
	}
	s.log.Warn("node cleanup deferred", "path", t.path, "request", t.id, "err", err)
	s.deferCleanup(t)
	return false
}

// deferCleanup hands t to the session's cleanup loop.
func (s *Session) deferCleanup(t cleanupTask) {
	s.mu.Lock()
	s.cleanups = append(s.cleanups, t)
	s.mu.Unlock()
	select {
	case s.cleanupSig <- struct{}{}:
	default:
	}
}

// runCleanup makes one attempt at t under ctx, updating t as it goes. It
// returns nil once the node is gone (or was never made), else the error
// that left the outcome unknown.
func (s *Session) runCleanup(ctx context.Context, t *cleanupTask) error {
	if t.create != nil {
		var resp api.CreateResponse
		err := s.writeID(ctx, t.id, &t.create.WriteHeader, api.RouteCreate, t.create, &resp)
		if unknownOutcome(err) {
			return err
		}
		s.reqs.end(t.id)
		t.id, t.create = 0, nil
		if err != nil {
			return nil // refused, so never applied; or the session is gone
		}
		t.path = resp.Node.Path
	}
	if t.path == "" {
		return nil
	}
	req := api.DeleteRequest{Path: t.path}
	var resp api.WriteResponse
	err := s.write(ctx, &req.WriteHeader, api.RouteDelete, &req, &resp)
	if unknownOutcome(err) {
		return err
	}
	if err != nil && api.CodeOf(err) != api.CodeNoNode && !sessionGone(err) && err != ErrClosed {
		s.log.Warn("cleanup delete refused", "path", t.path, "err", err)
	}
	return nil
}

// cleanupLoop finishes the cleanups that could not be done at once. Each
// attempt's retry loop runs until the session ends.
func (s *Session) cleanupLoop() {
	defer s.c.bg.Done()
	defer s.wg.Done()
	for attempt := 0; ; {
		select {
		case <-s.ctx.Done():
			return
		case <-s.cleanupSig:
		}
		s.mu.Lock()
		tasks := s.cleanups
		s.cleanups = nil
		s.mu.Unlock()
		var left []cleanupTask
		for _, t := range tasks {
			if err := s.runCleanup(s.ctx, &t); err != nil {
				left = append(left, t)
			}
		}
		if s.ctx.Err() != nil {
			return
		}
		if len(left) == 0 {
			attempt = 0
			continue
		}
		sleepCtx(s.ctx, backoff(attempt))
		attempt++
		s.mu.Lock()
		s.cleanups = append(left, s.cleanups...)
		s.mu.Unlock()
		select {
		case s.cleanupSig <- struct{}{}:
		default:
		}
	}
}

// pendingCleanups is how many cleanups wait for the background loop.
func (s *Session) pendingCleanups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cleanups)
}
