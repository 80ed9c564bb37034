package sdk

import (
	"context"
	"time"

	"github.com/lockservice/lockd/api"
)

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

// cleanup removes t's node: at once, within cleanupBudget and while the
// caller's ctx lasts, and otherwise in the background for as long as the
// session lives (when it ends the cell deletes the node anyway). A caller
// whose context has ended is never held up by it: the node then goes in
// the background. It reports whether the node is known to be gone on
// return. It takes over t.id: the caller must not end it.
func (s *Session) cleanup(caller context.Context, t cleanupTask) bool {
	if caller.Err() != nil {
		s.deferCleanup(t)
		return false
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cleanupBudget())
	stop := context.AfterFunc(caller, cancel) // the caller gave up: so does the attempt
	err := s.runCleanup(ctx, &t)
	stop()
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
