package sdk

// The KeepAlive loop: lease renewal, event delivery with acknowledgements,
// fail-over detection and watch re-registration.

import (
	"context"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// keepAliveLoop renews the lease: a long-poll KeepAlive with wait_ms =
// lease/3 on the KeepAlive connection pool, the next sent as soon as the
// previous returns (so one reaches the cell at least every lease/3). Each reply confirms the lease from the request's send
// time, may carry watch events, and reveals fail-over by a new epoch.
func (s *Session) keepAliveLoop() {
	defer s.c.bg.Done()
	defer s.wg.Done()
	req := api.KeepAliveRequest{Cell: s.cs.name, Session: s.id, Secret: s.secret}
	failed := false // the last round failed: the lease is in doubt
	for s.ctx.Err() == nil {
		// The long poll is the lease's, or the cache window's while the
		// cache holds values (renewWait); none after a failed round.
		wait := s.renewWait()
		prompt := failed && !mutant.On(mutant.KARetryLongTimeout)
		var resp api.SessionResponse
		cl := s.tel.countSends(s.keepAliveCall(&req, &resp, wait, prompt))
		// Bound a round by the lease so the loop regains control (and can
		// judge the lease) even while no replica answers.
		rctx, cancel := context.WithTimeout(s.ctx, s.lease)
		err := s.c.do(rctx, s.cs, cl)
		cancel()
		s.tel.noteRound(cl.attempts, err)
		if s.ctx.Err() != nil {
			return
		}
		failed = err != nil
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
		more, held := s.confirmed(cl.sent, &resp)
		if prompt {
			wait = 0 // answered at once: no long poll to pace by
		}
		s.pauseAfterReply(more, held, wait, cl.sent)
	}
}

// keepAliveCall is the loop's KeepAlive, a long poll of wait into resp
// (prompt: an immediate reply, after a failed round): its first attempt
// may take the whole long poll plus a margin for the reply
// (keepAliveMargin). Each later one asks for an immediate reply and may
// take the margin, doubled at each attempt up to the first's. Two hung
// replicas in a row (a paused leader, then the next one) took two long
// polls' time, 12 s of a 12 s lease, and the session was lost to two
// fail-overs of under 2 s each; a flat margin instead starved a client
// whose connections open, or whose leader answers, slower than it.
func (s *Session) keepAliveCall(req *api.KeepAliveRequest, resp *api.SessionResponse, wait time.Duration, prompt bool) *call {
	margin := keepAliveMargin(s.lease)
	cl := &call{
		route:        api.RouteSessionKeepAlive,
		req:          req,
		resp:         resp,
		keepAlive:    true,
		timeout:      wait + margin,
		retryTimeout: margin,
		retryUnsure:  true,
	}
	// A resent KeepAlive (after a redirect or a failure) asks for an
	// immediate reply: the lease confirmation, and the epoch of a
	// possible new leader, are wanted now, not after a long-poll.
	// Every attempt acknowledges the events processed so far: the cell
	// keeps (and re-sends) the rest, so a lost reply loses nothing.
	cl.before = func() {
		req.WaitMS = wait.Milliseconds()
		if cl.attempts > 0 || prompt {
			req.WaitMS = 0
		}
		s.fillAck(req)
	}
	return cl
}

// keepAliveMargin is how long a KeepAlive attempt may take beyond its
// long poll: a sixth of the lease (a new leader's first renewal of a
// session waits for a commit), at least 500 ms.
func keepAliveMargin(lease time.Duration) time.Duration {
	return max(lease/6, 500*time.Millisecond)
}

// pauseAfterReply paces the loop after a reply sent at sent: at once when
// it carried events (more) unless their acknowledgement is held back
// (held: then until the gate releases it, at most min(wait, 1 s)), and
// else no sooner than minKeepAliveGap after the send.
func (s *Session) pauseAfterReply(more, held bool, wait time.Duration, sent time.Time) {
	switch {
	case more && held:
		// The cell re-sends events whose acknowledgement the gate
		// holds back: this loop waits for a release (then its next
		// KeepAlive carries the acknowledgement and waits for more),
		// renewing the lease meanwhile without spinning.
		s.setHeldWait(true)
		t := time.NewTimer(min(wait, time.Second))
		select {
		case <-s.released:
		case <-t.C:
		case <-s.ctx.Done():
		}
		t.Stop()
		s.setHeldWait(false)
	case !more:
		if d := time.Since(sent); d < minKeepAliveGap {
			sleepCtx(s.ctx, minKeepAliveGap-d)
		}
	}
}

// fillAck puts the session's acknowledgements into a KeepAlive.
func (s *Session) fillAck(req *api.KeepAliveRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.AckEpoch, req.AckSeq = s.w.ack()
	req.Proxy, req.ProxyAck = s.proxy, s.w.pseq
	s.sentAck = [2]uint64{req.AckEpoch, req.AckSeq}
}

// ackPending reports whether the session has an acknowledgement no
// KeepAlive carried yet, with the KeepAlive loop in a long poll (it sends
// one itself when it waits for a release).
func (s *Session) ackPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, seq := s.w.ack()
	return !s.heldWait && s.sentAck != [2]uint64{e, seq}
}

// ackLoop sends an immediate KeepAlive when the gate releases a held
// acknowledgement (a write, or a new leader, waits for it), or when the
// cache took its first value while the main loop is in a lease-long poll
// (storeLocked): the main loop may be in a long poll; a newer KeepAlive
// ends the one the cell holds, which then goes on as usual.
func (s *Session) ackLoop() {
	defer s.c.bg.Done()
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.ackKick:
		}
		if !s.ackPending() && !s.takeRenewSoon() {
			continue
		}
		req := api.KeepAliveRequest{Cell: s.cs.name, Session: s.id, Secret: s.secret}
		var resp api.SessionResponse
		cl := s.tel.countSends(&call{route: api.RouteSessionKeepAlive, req: &req, resp: &resp, keepAlive: true, retryUnsure: true,
			before: func() {
				s.fillAck(&req)
			}})
		rctx, cancel := context.WithTimeout(s.ctx, s.lease/3)
		err := s.c.do(rctx, s.cs, cl)
		cancel()
		s.tel.noteRound(cl.attempts, err)
		if err == nil {
			s.confirmed(cl.sent, &resp)
		}
	}
}

func (s *Session) setHeldWait(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heldWait = v
}

// watchHold kicks ackLoop when ch closes.
func (s *Session) watchHold(ch <-chan struct{}) {
	s.wg.Add(1)
	s.c.bg.Add(1)
	go func() {
		defer s.c.bg.Done()
		defer s.wg.Done()
		select {
		case <-ch:
			for _, sig := range [...]chan struct{}{s.ackKick, s.released} {
				select {
				case sig <- struct{}{}:
				default:
				}
			}
		case <-s.ctx.Done():
		}
	}()
}

// confirmed applies a KeepAlive reply to the session. It reports whether
// the reply carried events (new or repeated): then the next KeepAlive, which
// acknowledges them, goes at once; and whether an acknowledgement is held
// back (Config.Gate).
func (s *Session) confirmed(sentAt time.Time, resp *api.SessionResponse) (more, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false, false
	}
	s.renewedLocked(sentAt, resp.LeaseAgeMS)
	s.index = max(s.index, resp.Index)
	rearm := s.proxyLocked(sentAt, resp)
	rearm = s.deliverLocked(resp) || rearm
	rearm = s.failoverLocked(resp.Epoch) || rearm
	if rearm {
		s.signalRearm()
	}
	return len(resp.Events) > 0 || len(resp.ProxyEvents) > 0, s.w.held()
}

// confirmedSend is the send a reply confirms the lease from: sentAt, less
// the lease's age at the proxy (a proxy renews in batches: the lease it
// confirms began leaseAgeMS before the request reached it, so before this
// send less that).
func confirmedSend(sentAt time.Time, leaseAgeMS int64) time.Time {
	return sentAt.Add(-time.Duration(leaseAgeMS) * time.Millisecond)
}

// renewedLocked moves the lease clock to a reply to the KeepAlive sent at
// sentAt: the session is safe again if it was in jeopardy.
func (s *Session) renewedLocked(sentAt time.Time, leaseAgeMS int64) {
	sent := confirmedSend(sentAt, leaseAgeMS)
	if sent.After(s.lastConfirmedSend) {
		s.lastConfirmedSend = sent
	}
	s.tel.confirmedAt = time.Now()
	if s.clockLocked().safeAgain(time.Now()) {
		// Confirmed again within the grace period: same session, same
		// locks and tokens.
		s.log.Info("session safe again", "jeopardy_for", time.Since(s.jeopardySince))
		s.tel.jeopardyEnded(time.Since(s.jeopardySince))
		s.jeopardySince = time.Time{}
		s.leaseCtx, s.leaseCancel = context.WithCancel(s.ctx)
		s.signalLeaseLocked()
		s.emitLocked(SessionEvent{Type: SessionSafe})
	}
	select {
	case s.confirmedSig <- struct{}{}:
	default:
	}
}

// proxyGrantEnd is when a proxy's grant to serve from cache, cacheMS
// counted from the request's arrival at the proxy, ends on this client's
// clock: counted from this send (not less the lease's age: the proxy
// counted it from the request's arrival), less the drift margin (the
// proxy counted it on its own clock).
func proxyGrantEnd(sentAt time.Time, cacheMS int64) time.Time {
	d := time.Duration(cacheMS) * time.Millisecond
	return sentAt.Add(d - DriftMargin(d))
}

// proxyLocked records the proxy a reply came through, and its grant to
// serve from cache. It reports whether the watches must be re-armed (the
// proxy changed).
func (s *Session) proxyLocked(sentAt time.Time, resp *api.SessionResponse) (rearm bool) {
	if resp.Proxy != s.proxy {
		// Another proxy (or none): the values the old one made cacheable
		// are no longer invalidated, and the watches it held for this
		// session are gone with it. Its events are numbered afresh.
		s.log.Info("keepalives through another proxy", "old", s.proxy, "proxy", resp.Proxy)
		s.proxy, s.w.pseq = resp.Proxy, 0
		s.cache.flush()
		rearm = s.w.markAllDirty()
	}
	if resp.Proxy != "" {
		s.proxyCacheUntil = proxyGrantEnd(sentAt, resp.CacheMS)
	}
	return rearm
}

// deliverLocked hands a reply's events (the cell's and the proxy's) to
// the watchers, drops the paths they invalidate from the cache, and holds
// back the acknowledgement of an invalidation while Config.Gate asks. It
// reports whether the watches must be re-armed.
func (s *Session) deliverLocked(resp *api.SessionResponse) (rearm bool) {
	r1, invalidated, firstInv, resync := s.w.dispatch(resp.Epoch, resp.Events)
	r2, pinvalidated, presync := s.w.dispatchProxy(resp.ProxyEvents)
	for _, p := range append(invalidated, pinvalidated...) {
		s.cache.invalidate(p)
	}
	if resync || presync {
		s.cache.flush() // the events it replaced may have been invalidations
	}
	if g := s.c.cfg.Gate; g != nil && firstInv > 0 {
		if ch := g.Invalidated(s.cs.name, gatedPaths(invalidated, resync)); ch != nil {
			s.w.hold(firstInv, ch)
			s.watchHold(ch)
		}
	}
	return r1 || r2
}

// gatedPaths are the paths an invalidation the gate may hold back stands
// for: nil (every path) after a resync, which may stand for any
// invalidation.
func gatedPaths(invalidated []string, resync bool) []string {
	if resync {
		return nil
	}
	return invalidated
}

// failoverLocked follows the cell's leader epoch a reply names: a new one
// (a fail-over) flushes the cache, marks every watch for re-arming and
// tells the application, and Config.Gate may hold back the new epoch's
// acknowledgement. It reports whether the watches must be re-armed.
func (s *Session) failoverLocked(epoch uint64) (rearm bool) {
	if epoch == 0 || epoch == s.epoch {
		return false
	}
	s.log.Info("cell fail-over", "old_epoch", s.epoch, "epoch", epoch)
	s.epoch = epoch
	s.gen++
	// The new leader knows none of this session's cache entries, and
	// an invalidation may have been lost with the old one. The flush
	// happens before the next KeepAlive acknowledges the new epoch,
	// which is what the new leader waits for.
	s.cache.flush()
	// The new leader holds none of the old one's in-memory watches.
	rearm = s.w.markAllDirty()
	s.emitLocked(SessionEvent{Type: SessionFailover, Epoch: epoch})
	if g := s.c.cfg.Gate; g != nil {
		if ch := g.FailedOver(s.cs.name, epoch); ch != nil {
			s.w.epochHold = ch
			s.watchHold(ch)
		}
	}
	return rearm
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
				req:         api.WatchRequest{Cell: s.cs.name, Session: s.id, Secret: s.secret, Watches: chunk},
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
