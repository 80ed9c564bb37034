package chaos

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// holderFault kills (kill-holder) or pauses (pause-holder) the holder
// process and measures the takeover: the fault → the waiter's grant. A
// paused holder is resumed only after the waiter has written with its
// token, so the write the holder prepared before the pause reaches the
// resource late and must be refused.
type holderFault struct{ kind FaultKind }

func (f holderFault) Kind() FaultKind { return f.kind }
func (holderFault) Needs() []need     { return []need{needHolder} }

func (holderFault) Inject(ctx context.Context, n *executor, st Step, _ target) error {
	h := n.holder
	// Drop a grant left over from a previous step.
	select {
	case <-n.tw.grants:
	default:
	}
	var err error
	t0 := time.Now()
	if st.Kind == KillHolder {
		err = h.kill()
	} else {
		err = h.signal(syscall.SIGSTOP)
	}
	at := n.e.h.Now()
	if err != nil {
		return err
	}
	n.count(st.Label())
	n.logf("chaos: %s %s (pid %d)", st.Kind, h.name, h.pid())
	var grantErr error
	n.e.h.Checked("liveness")
	select {
	case g := <-n.tw.grants:
		n.mu.Lock()
		n.takeovers = append(n.takeovers, Sample{string(st.Kind), g - at})
		n.mu.Unlock()
		n.logf("chaos: takeover %v after %s", (g - at).Round(time.Millisecond), st.Kind)
	case <-time.After(n.e.cfg.TakeoverBound):
		n.violation("liveness", "%s at %v: the waiter was not granted within %v", st.Kind, at.Round(time.Millisecond), n.e.cfg.TakeoverBound)
		grantErr = errors.New("no takeover")
	case <-ctx.Done():
		grantErr = ctx.Err()
	}
	if st.Kind == PauseHolder {
		if rest := st.Hold - time.Since(t0); rest > 0 {
			sleepCtx(ctx, rest)
		}
		_ = h.signal(syscall.SIGCONT)
		select {
		case <-h.done: // it found its lock lost and exited
		case <-time.After(n.e.cfg.TakeoverBound):
			n.logf("chaos: resumed %s did not exit; killing it", h.name)
			_ = h.kill()
		}
	}
	select {
	case n.tw.release <- struct{}{}:
	default:
	}
	if grantErr != nil {
		return grantErr
	}
	return n.newHolder(ctx)
}
