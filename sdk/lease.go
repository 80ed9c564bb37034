package sdk

// The local lease clock: when the client must assume its lease is in doubt
// (jeopardy) or gone, decided on the monotonic clock from the send time of
// the last confirmed KeepAlive.

import (
	"context"
	"time"

	"github.com/lockservice/lockd/api"
)

// LocalExpiry is when the client assumes its lease ends: the send time of
// the last KeepAlive the cell confirmed, plus the lease, less DriftMargin.
// The cell's own expiry is never earlier.
func (s *Session) LocalExpiry() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.localExpiryLocked()
}

func (s *Session) localExpiryLocked() time.Time {
	return s.clockLocked().expiry()
}

// clockLocked is the session's lease clock as of now.
func (s *Session) clockLocked() leaseClock {
	return leaseClock{lastConfirmedSend: s.lastConfirmedSend, lease: s.lease, grace: s.grace, jeopardySince: s.jeopardySince}
}

// leaseClock is the local lease clock's state; its methods are pure (the
// time is passed in), so its decisions are tested without waiting.
type leaseClock struct {
	lastConfirmedSend time.Time     // send time of the last confirmed KeepAlive
	lease, grace      time.Duration // granted lease; grace period in jeopardy
	jeopardySince     time.Time     // zero unless in jeopardy
}

// leaseStep is what the lease clock says to do now.
type leaseStep int

const (
	leaseKeep     leaseStep = iota // nothing changes; look again at next
	leaseJeopardy                  // the local lease ran out: enter jeopardy
	leaseExpired                   // the grace period ran out: the session is gone
)

// expiry is when the client assumes its lease ends: never after the
// cell's own expiry, which counts from the KeepAlive's arrival.
func (lc leaseClock) expiry() time.Time {
	return lc.lastConfirmedSend.Add(lc.lease - DriftMargin(lc.lease))
}

// step decides at now what the watchdog does, and when it looks again
// (absent a new confirmation).
func (lc leaseClock) step(now time.Time) (leaseStep, time.Time) {
	if lc.jeopardySince.IsZero() {
		if next := lc.expiry(); now.Before(next) {
			return leaseKeep, next
		}
		return leaseJeopardy, now.Add(lc.grace)
	}
	if next := lc.jeopardySince.Add(lc.grace); now.Before(next) {
		return leaseKeep, next
	}
	return leaseExpired, time.Time{}
}

// safeAgain reports whether a confirmation at now (lastConfirmedSend
// already updated) ends a jeopardy: it must leave a certain lease.
func (lc leaseClock) safeAgain(now time.Time) bool {
	return !lc.jeopardySince.IsZero() && now.Before(lc.expiry())
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
		step, next := s.clockLocked().step(now)
		switch step {
		case leaseJeopardy:
			s.jeopardySince = now
			s.tel.jeopardies++
			s.leaseCancel()
			s.signalLeaseLocked()
			s.emitLocked(SessionEvent{Type: SessionJeopardy})
			s.log.Warn("session in jeopardy: local lease ran out", "last_confirmed_send", s.lastConfirmedSend)
		case leaseExpired:
			s.mu.Unlock()
			s.expire(api.Errorf(api.CodeSessionExpired, "session %d: no confirmation within the %v grace period", s.id, s.grace))
			return
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
