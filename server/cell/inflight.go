package cell

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
)

// A proposal made while this replica leads is bound to that leadership.
// When the leadership ends, a proposal still waiting is not answered at
// once: its entry may be in the next leader's log (a planned hand-off
// moves leadership only to a replica that is caught up), and then it
// commits and applies here too, and its caller gets the real answer. Its
// fate is decided once this replica applies a later leadership's
// leader_start: an entry of the ended leadership not applied by then was
// overwritten and will never apply, and no reply for it ever comes here.
// From then (or, on a replica cut off from the next leader, a grace of the
// longest election timeout after the end) the wait ends with
// errLeadershipLost, its outcome unknown, instead of running out its
// deadline. (The listener's view can lag Raft's: a proposal made as the
// replica steps down may be forwarded to the next leader and apply after
// its leader_start; it is then answered outcome-unknown though it applied
// — spurious, never wrong.) Before this,
// a write waited its whole timeout, and a move's copy page a minute (a
// stage on a target cell whose leader changed mid-copy held its prefix
// sealed that long).

// errLeadershipLost ends a proposal whose leadership ended under it; its
// outcome is unknown.
var errLeadershipLost = errors.New("the leadership it was proposed under ended")

// maxEndedLeaderships bounds the ended leaderships whose proposals are
// still awaiting their fate; past it the oldest ends at once.
const maxEndedLeaderships = 16

// leadership is one term of this replica's leadership: its proposals'
// common cancellation.
type leadership struct {
	term   uint64
	ctx    context.Context
	cancel context.CancelCauseFunc
	grace  *time.Timer // set once it ended
}

// leaderBound tracks this replica's leadership for its proposals. The zero
// value is ready for use: not leading.
type leaderBound struct {
	mu    sync.Mutex
	cur   *leadership   // the running leadership; nil when not leading
	ended []*leadership // ended, their proposals' fate not yet decided
	// decided is the highest term whose leader_start applied here: a
	// leadership of an older term that the listener reports ended only
	// now (its events come on a queue of their own) is decided already.
	decided uint64
}

// lead records that this replica leads term; a running leadership of
// another term ends (a re-election the listener reported no loss
// between).
func (b *leaderBound) lead(term uint64, grace time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur != nil && b.cur.term == term {
		return
	}
	b.endLocked(grace)
	ctx, cancel := context.WithCancelCause(context.Background())
	b.cur = &leadership{term: term, ctx: ctx, cancel: cancel}
}

// lose records that this replica no longer leads.
func (b *leaderBound) lose(grace time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.endLocked(grace)
}

// endLocked ends the running leadership, if any: its proposals end when a
// later leader_start applies here (settled), or after grace.
func (b *leaderBound) endLocked(grace time.Duration) {
	l := b.cur
	if l == nil {
		return
	}
	b.cur = nil
	if l.term < b.decided {
		b.stopLocked(l)
		return
	}
	if len(b.ended) == maxEndedLeaderships {
		b.stopLocked(b.ended[0])
	}
	b.ended = append(b.ended, l)
	l.grace = time.AfterFunc(grace, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.stopLocked(l)
	})
}

// settled records that the leader_start of term applied here: the
// proposals of every ended leadership before term are decided, and those
// still waiting never apply.
func (b *leaderBound) settled(term uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.decided = max(b.decided, term)
	for _, l := range append([]*leadership(nil), b.ended...) {
		if l.term < term {
			b.stopLocked(l)
		}
	}
}

// stopLocked ends leadership l's proposals and forgets it.
func (b *leaderBound) stopLocked(l *leadership) {
	for i, e := range b.ended {
		if e == l {
			b.ended = append(b.ended[:i], b.ended[i+1:]...)
			break
		}
	}
	if l.grace != nil {
		l.grace.Stop()
	}
	if !mutant.On(mutant.ProposalOutlivesLeader) {
		l.cancel(errLeadershipLost)
	}
}

// bind returns ctx, bound to the running leadership if this replica leads
// (cancelled with errLeadershipLost once that leadership has ended and its
// fate is decided), else ctx itself; stop releases it.
func (b *leaderBound) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	b.mu.Lock()
	l := b.cur
	b.mu.Unlock()
	if l == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}
