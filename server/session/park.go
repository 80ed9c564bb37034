package session

// A KeepAlive's wait. A synchronous Renew waits on a channel in its
// caller's goroutine; RenewAsync parks the call with no goroutine of its
// own (a timer and a callback), so ten thousand sessions held straight on
// a leader cost their leases and connections, not ten thousand stacks.

import (
	"context"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
)

// waiter is a session's waiting KeepAlive. Exactly one of ch and fn is
// set. Released under m.mu, at most once (the lease forgets it).
type waiter struct {
	ch    chan struct{} // Renew: closed on release
	fn    func()        // RenewAsync: run in a goroutine of its own on release
	timer *time.Timer   // RenewAsync: ends the wait
	// timerFired: its timer released it (only the mutant asks).
	timerFired bool
}

// releaseWaiter answers l's waiting KeepAlive, if any (m.mu held).
func (l *lease) releaseWaiter() {
	w := l.wake
	if w == nil {
		return
	}
	l.wake = nil
	if w.ch != nil {
		close(w.ch)
		return
	}
	if mutant.On(mutant.ParkNoWake) && !w.timerFired {
		l.wake = w // deaf until its timer
		return
	}
	w.timer.Stop()
	go w.fn()
}

// RenewAsync is Renew whose wait holds no goroutine. When the answer is
// ready at once (events waiting, no wait asked, or an error) it returns
// it with parked false. Otherwise it parks the call and returns parked
// true: done is then called exactly once, from a goroutine of its own,
// with what Renew would have returned, when the session has events, a
// newer KeepAlive of the session arrives, the session ends, leadership
// ends, or the wait (at most half the lease) is over. ctx bounds only the
// first renewal's confirmation under a new leader, which happens before
// the call parks.
func (m *Manager) RenewAsync(ctx context.Context, id uint64, wait time.Duration, ack Ack, done func(Renewal, error)) (r Renewal, parked bool, err error) {
	l, epoch, wait, r, err := m.renewStart(ctx, id, wait, ack)
	if l == nil {
		return r, false, err
	}
	w := &waiter{}
	w.fn = func() { done(m.renewalAfterWait(id, l, epoch, w)) }
	w.timer = time.AfterFunc(wait, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if l.wake == w {
			w.timerFired = true
			l.releaseWaiter()
		}
	})
	l.wake = w
	m.mu.Unlock()
	return Renewal{}, true, nil
}
