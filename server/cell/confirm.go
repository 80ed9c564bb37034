package cell

import (
	"context"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// A KeepAlive is answered only after a ReadIndex round, started after its
// lease was renewed, confirms that this replica still leads under the
// renewal's epoch (a deposed leader must never extend a lease the next
// leader does not know about). One round confirms every KeepAlive that
// joined before it started, so the cost is per round, not per KeepAlive:
// idle KeepAlives (the long poll ran out with nothing to say) wait up to
// confirmWindow for company, while a reply carrying events (a lock hand-off,
// a watch) starts a round at once.

// confirmWindow bounds how long an idle KeepAlive reply waits for others to
// share its ReadIndex round. Its client counts the lease from its own send,
// so the wait costs the lease nothing.
const confirmWindow = 20 * time.Millisecond

// sessionCheck asks whether session is live and the state's epoch is epoch.
type sessionCheck struct{ session, epoch uint64 }

// sessionsQuery checks many sessions after one ReadIndex.
type sessionsQuery []sessionCheck

// run answers each check: nil, or why the session is not live or this
// replica no longer leads under its epoch.
func (q sessionsQuery) run(s *fsm.State) (sessionsResult, error) {
	r := sessionsResult{index: s.Index(), errs: make([]error, len(q))}
	for i, chk := range q {
		if s.Epoch() != chk.epoch {
			r.errs[i] = errNotLeading
			continue
		}
		// Only a real error goes in: SessionExists returns a typed
		// *api.Error, and a nil one in an error is not a nil error.
		if err := s.SessionExists(chk.session); err != nil {
			r.errs[i] = err
		}
	}
	return r, nil
}

// readSessions is the confirmer's ReadIndex round: q read linearizably.
func (c *Cell) readSessions(ctx context.Context, q sessionsQuery) (sessionsResult, error) {
	return read(ctx, c, q.run)
}

// sessionsResult answers a sessionsQuery: the index read at, and per check
// nil or why it failed.
type sessionsResult struct {
	index uint64
	errs  []error
}

type confirmReply struct {
	index uint64
	err   error   // the round failed
	errs  []error // per check, when it did not
}

// confirmWait is one KeepAlive (one check) or one batch (many) waiting
// for a round.
type confirmWait struct {
	checks []sessionCheck
	reply  chan confirmReply // buffered: the round never blocks on a caller gone
}

// confirmer batches KeepAlive confirmations into ReadIndex rounds.
type confirmer struct {
	read   func(context.Context, sessionsQuery) (sessionsResult, error)
	window time.Duration

	mu      sync.Mutex
	pending []confirmWait
	urgent  bool
	rounds  uint64 // ReadIndex rounds run, for tests and metrics

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

func newConfirmer(read func(context.Context, sessionsQuery) (sessionsResult, error), window time.Duration) *confirmer {
	b := &confirmer{read: read, window: window, kick: make(chan struct{}, 1), done: make(chan struct{})}
	b.wg.Add(1)
	go b.run()
	return b
}

func (b *confirmer) close() {
	close(b.done)
	b.wg.Wait()
}

// confirm waits for a round started after the call to confirm session under
// epoch, and returns the index the round read at.
func (b *confirmer) confirm(ctx context.Context, session, epoch uint64, urgent bool) (uint64, error) {
	r := b.confirmAll(ctx, []sessionCheck{{session, epoch}}, urgent)
	if r.err != nil {
		return 0, r.err
	}
	return r.index, r.errs[0]
}

// confirmAll is confirm for many sessions: the reply's err is set when
// the round failed, else errs has one entry per check.
func (b *confirmer) confirmAll(ctx context.Context, checks []sessionCheck, urgent bool) confirmReply {
	w := confirmWait{checks: checks, reply: make(chan confirmReply, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, w)
	first := len(b.pending) == 1
	b.urgent = b.urgent || urgent
	b.mu.Unlock()
	if first || urgent {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	select {
	case r := <-w.reply:
		return r
	case <-ctx.Done():
		return confirmReply{err: api.Errorf(api.CodeUnavailable, "keepalive confirmation: %v", ctx.Err())}
	case <-b.done:
		return confirmReply{err: api.Errorf(api.CodeUnavailable, "cell shutting down")}
	}
}

// Rounds returns how many ReadIndex rounds have run.
func (b *confirmer) Rounds() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rounds
}

func (b *confirmer) run() {
	defer b.wg.Done()
	for {
		select {
		case <-b.done:
			return
		case <-b.kick:
		}
		b.mu.Lock()
		urgent := b.urgent
		b.mu.Unlock()
		if !urgent {
			// Only idle replies so far: let others join, unless an urgent
			// one arrives (its kick ends the wait).
			t := time.NewTimer(b.window)
			select {
			case <-t.C:
			case <-b.kick:
			case <-b.done:
				t.Stop()
				return
			}
			t.Stop()
		}
		b.mu.Lock()
		batch := b.pending
		b.pending, b.urgent = nil, false
		if len(batch) > 0 {
			b.rounds++
		}
		b.mu.Unlock()
		if len(batch) > 0 {
			b.round(batch)
		}
	}
}

// round runs one ReadIndex for batch and answers each waiter.
func (b *confirmer) round(batch []confirmWait) {
	var q sessionsQuery
	for _, w := range batch {
		q = append(q, w.checks...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	res, err := b.read(ctx, q)
	cancel()
	at := 0
	for _, w := range batch {
		r := confirmReply{err: err}
		if err == nil {
			r = confirmReply{index: res.index, errs: res.errs[at : at+len(w.checks)]}
		}
		at += len(w.checks)
		w.reply <- r
	}
}
