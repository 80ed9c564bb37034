package sdk

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockservice/lockd/api"
)

// act carries out decision d on outcome o of attempt r: it records what d
// says about the endpoint, then ends the call (done, with its error or nil
// on success) or lets the loop send again (after a backoff if d says so).
func (l *retryLoop) act(ctx context.Context, o outcome, d decision, r attemptResult) (done bool, err error) {
	if d.follow {
		l.cs.redirect(o.addr, o.hint)
	}
	if d.forget {
		l.cs.failed(o.addr)
	}
	switch d.act {
	case actDone:
		return true, l.finish(r)
	case actCanceled:
		return true, l.giveUp(ctx.Err())
	case actClosed:
		return true, ErrClosed
	case actNoCluster:
		return true, noClusterErr(l.st.refused, time.Since(l.st.refusedSince))
	case actRefresh:
		l.refreshDirectory(ctx)
		return true, finalError(l.cl, o, d.act, l.st.last)
	case actUnknown, actFail:
		return true, finalError(l.cl, o, d.act, l.st.last)
	case actRetry:
		return false, nil
	default: // actBackoff
		if o.transport {
			l.c.log.Debug("lockd request failed, retrying", "cell", l.cs.name, "endpoint", o.addr, "route", l.cl.route, "err", r.err)
		}
		err := l.wait(ctx)
		return err != nil, err
	}
}

// finish ends a call answered 2xx: the reply decoded into cl.resp, and
// the replica recorded as the cell's leader.
func (l *retryLoop) finish(r attemptResult) error {
	if l.cl.resp != nil && len(r.body) > 0 {
		start := l.trace.now()
		if err := decodeReply(r.body, l.cl.resp); err != nil {
			return api.Errorf(api.CodeInternal, "decode %s reply from %s: %v", l.cl.route, r.addr, err)
		}
		l.trace.decoded(start)
	}
	if !l.cl.anyReplica {
		l.cs.answered(r.addr)
	}
	l.cl.sent = r.sent
	return nil
}

// refreshDirectory reloads the directory after a wrong_cell or moved
// refusal (it is stale: a prefix moved), so that the caller's next call is
// routed right.
func (l *retryLoop) refreshDirectory(ctx context.Context) {
	if l.cs == l.c.seeds {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.c.RefreshDirectory(rctx); err != nil {
		l.c.log.Warn("directory refresh after wrong_cell failed", "err", err)
	}
}

// wait sleeps the next jittered backoff; an error ends the call (its
// context ended, or the client closes).
func (l *retryLoop) wait(ctx context.Context) error {
	t := time.NewTimer(backoff(l.st.retries))
	l.st.retries++
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return l.giveUp(ctx.Err())
	case <-l.closing:
		return ErrClosed
	}
}

// giveUp is the error of a call whose context ended (err) before it had
// an answer: ErrClosed if the client closed meanwhile.
func (l *retryLoop) giveUp(err error) error {
	if l.c.closed.Load() && !l.cl.duringClose {
		return ErrClosed
	}
	return gaveUp(l.cs.name, l.cl, l.st.last, err)
}

// gaveUp is the error of call cl on cell (""; any endpoint) whose context
// ended with err, last its last attempt's error: outcome-unknown for a
// write an attempt may have reached the cell with, else unavailable
// wrapping err. Pure.
func gaveUp(cell string, cl *call, last *api.Error, err error) error {
	where := fmt.Sprintf("on cell %q", cell)
	if cell == "" {
		where = "from any endpoint"
	}
	msg := fmt.Sprintf("%s %s: gave up after %d attempts: %v", cl.route, where, cl.attempts, err)
	if last != nil {
		msg += " (last error: " + last.Error() + ")"
	}
	if cl.write && cl.reached {
		return outcomeUnknown(err, "%s", msg)
	}
	return &gaveUpError{apiErr: &api.Error{Code: api.CodeUnavailable, Message: msg}, ctxErr: err}
}

// finalError is the error a call ends with on a final answer (actFail,
// actUnknown, actRefresh), last the attempt's error. A write ends
// outcome-unknown when it may have been applied: on actUnknown always; on
// a refusal after an earlier attempt may have reached the cell (a lockd
// that no longer hosts the cell, or a sealed prefix, refuses without
// looking: sending the write on to another cell could apply it twice).
// Pure.
func finalError(cl *call, o outcome, act action, last *api.Error) error {
	switch {
	case last == nil:
		// Not reached: observe records the refusal of every attempt
		// that ends here. A nil *api.Error must not become a non-nil
		// error.
		return api.Errorf(api.CodeInternal, "sdk: a final answer without an error")
	case act == actFail:
		return last
	case act == actUnknown && cl.write:
		return outcomeUnknown(nil, "%s", last.Message)
	case act == actUnknown && o.transport:
		e := *last
		e.Message += "; the outcome is unknown"
		return &e
	case act == actRefresh && cl.write && cl.reached:
		return outcomeUnknown(last, "%s", last.Message)
	default:
		return last
	}
}

// noClusterErr is ErrNoCluster's error: every endpoint (refused) refused
// connections for the time given.
func noClusterErr(refused []string, since time.Duration) error {
	return &noClusterError{apiErr: api.Errorf(api.CodeUnavailable,
		"no lockd listens at %s: every endpoint refused the connection for %v (is a cluster running? make run starts a local one; or give its addresses with --endpoints)",
		strings.Join(refused, ", "), since.Round(100*time.Millisecond))}
}
