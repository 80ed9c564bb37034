package cell

import (
	"context"
	"log/slog"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/fsm"
	"github.com/lockservice/lockd/server/session"
)

// A planned leadership hand-over (server/fsm handover.go): the leader
// stops renewing leases, commits each session's silence (hand_over),
// and only then asks Raft to move the leadership, so that the next
// leader charges a silent session its silence instead of granting it a
// full lease (a frozen lock holder's takeover is then about a lease after
// its last renewal, not a hand-over plus a lease). If the leadership did
// not move, an empty hand_over cancels the record before renewals go on.

const (
	// handOverCommitTimeout bounds one proposal of a hand-over's entries.
	handOverCommitTimeout = 3 * time.Second
	// handOverCancelAttempts bounds the cancel's proposals in the call;
	// past them the leader stays frozen (it renews nothing it could not
	// pass on), asks Raft to move the leadership once more and goes on
	// proposing the cancel in the background (keepCancelling) for as long
	// as it leads.
	handOverCancelAttempts = 3
	// handOverRetryEvery is how often keepCancelling proposes the cancel
	// (and, every handOverRetransfer of them, asks Raft to move the
	// leadership again).
	handOverRetryEvery = time.Second
	handOverRetransfer = 10
	// handOverPoll is how often the hand-over looks whether the
	// leadership moved.
	handOverPoll = 20 * time.Millisecond
)

// handOverSteps are a hand-over's effects, apart so that its order is
// tested on its own (TestHandOverCancelsBeforeThaw).
type handOverSteps struct {
	// record commits the silences (hand_over); cancel commits an empty
	// one (nil: a stopping lockd cancels nothing, the next leader
	// charges the record). Both under the leadership's epoch.
	record func(ctx context.Context, epoch uint64, silences []session.Silence) error
	cancel func(ctx context.Context, epoch uint64) error
	// transfer asks Raft to move the leadership; moved reports whether
	// it left this replica (or its term ended).
	transfer func() error
	moved    func() bool
	// thaw lets the session manager renew again under epoch.
	thaw  func(epoch uint64)
	sleep func(time.Duration)
	log   *slog.Logger
}

// runHandOver records the silences, asks Raft to move the leadership and
// waits up to wait for it to move. If it does not (or a step fails), it
// cancels the record and only then thaws the manager. frozen: the
// leadership did not move and the cancel did not commit (the manager
// still holds renewals).
func runHandOver(s handOverSteps, epoch uint64, silences []session.Silence, wait time.Duration) (frozen bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), handOverCommitTimeout)
	err = s.record(ctx, epoch, silences)
	cancel()
	if err == nil {
		err = s.transfer()
	}
	if err == nil {
		if err = awaitMove(s, wait); err == nil {
			return false, nil
		}
	}
	return !cancelHandOver(s, epoch), err
}

// awaitMove waits up to wait for the leadership to leave this replica,
// asking Raft again at half time (a transfer Raft gave up after its
// election timeout, a target slow to catch up under load).
func awaitMove(s handOverSteps, wait time.Duration) error {
	again := true
	for waited := time.Duration(0); waited < wait; waited += handOverPoll {
		if s.moved() {
			return nil
		}
		if again && waited >= wait/2 {
			again = false
			_ = s.transfer()
		}
		s.sleep(handOverPoll)
	}
	if s.moved() {
		return nil
	}
	return api.Errorf(api.CodeUnavailable, "the leadership did not move within %s", wait)
}

// cancelHandOver commits an empty hand_over, then thaws the manager; if
// the leadership moved or ended meanwhile, the manager stopped and
// nothing is left to thaw. An outcome unknown is retried: the record, if
// it committed, comes before the cancel in the log. It reports whether
// the hand-over is settled (thawed, or the leadership over).
func cancelHandOver(s handOverSteps, epoch uint64) bool {
	if mutant.On(mutant.HandOverUncancelled) {
		s.thaw(epoch) // broken: the record stays for the next leader
		return true
	}
	if s.cancel == nil {
		return s.moved()
	}
	for attempt := 0; attempt < handOverCancelAttempts; attempt++ {
		settled, err := cancelOnce(s, epoch)
		if settled {
			return true
		}
		s.log.Warn("hand-over's cancel not committed", "epoch", epoch, "attempt", attempt, "err", err)
		s.sleep(100 * time.Millisecond)
	}
	s.log.Error("hand-over's cancel not committed: renewals stay held; asking Raft to move the leadership again", "epoch", epoch)
	_ = s.transfer()
	return false
}

// cancelOnce proposes the cancel once: settled if it committed (the
// manager is thawed), was refused (a later leadership: this one's manager
// stopped) or the leadership moved.
func cancelOnce(s handOverSteps, epoch uint64) (settled bool, err error) {
	if s.moved() {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), handOverCommitTimeout)
	err = s.cancel(ctx, epoch)
	cancel()
	if err == nil {
		s.thaw(epoch)
		return true, nil
	}
	return IsRefusal(err), err
}

// handOverWait is how long a hand-over waits for the leadership to move:
// Raft gives a transfer one election timeout (ElectionRTT ticks), asked
// twice (awaitMove), and the new leader's first message then reaches
// this replica. Renewals are held meanwhile: at most 2 s in production
// timing, a sixth of the lease.
func (c *Cell) handOverWait() time.Duration {
	if g := time.Duration(c.cfg.ElectionRTT) * c.rtt; g > 0 {
		return 2 * g
	}
	return time.Second
}

// handOverTo moves this cell's leadership, held here, to replica to, and
// waits up to wait for it to move. A replica that does not lead, or a
// cell whose log codec is below V4 (a replica of an older build could not
// apply hand_over), makes a plain transfer request, as does one whose
// last hand-over still holds renewals (its record, if committed, is still
// true). stopping: the lockd is stopping and cancels nothing.
func (c *Cell) handOverTo(to uint64, wait time.Duration, stopping bool) error {
	if to == c.cfg.ReplicaID {
		return nil
	}
	term := c.term.Load()
	transfer := func() error {
		if err := c.nh.RequestLeaderTransfer(c.cfg.Info.ShardID, to); err != nil {
			return raftError(err)
		}
		return nil
	}
	if active, _ := c.sessions.Active(); !active || c.LogCodec() < fsm.LogCodecV4 || c.sessions.HandingOver() || mutant.On(mutant.HandOverSkipped) {
		if err := transfer(); err != nil {
			return err
		}
		return awaitMove(handOverSteps{transfer: transfer, moved: func() bool { return !c.leading(term) }, sleep: time.Sleep}, wait)
	}
	epoch, silences, err := c.sessions.HandOver()
	if err != nil {
		return err
	}
	steps := c.handOverSteps(term, epoch, transfer)
	if stopping {
		// A stopping lockd cancels nothing (the next leader charges the
		// record) and spends no more than its budget on the record.
		steps.cancel = nil
		steps.record = func(ctx context.Context, epoch uint64, silences []session.Silence) error {
			ctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			return c.proposeHandOver(ctx, epoch, silences)
		}
	}
	frozen, err := runHandOver(steps, epoch, silences, wait)
	if err == nil {
		c.handOvers.Add(1)
		c.log.Info("leadership handed over", "to", to, "sessions", len(silences))
	} else {
		c.handOversFailed.Add(1)
		c.log.Warn("leadership not handed over", "to", to, "err", err, "renewals_held", frozen)
	}
	if frozen && !stopping {
		select {
		case <-c.stop:
		default:
			c.wg.Add(1)
			go c.keepCancelling(steps, epoch)
		}
	}
	return err
}

// handOverSteps are the cell's effects of a hand-over of the leadership
// of term, whose session manager runs under epoch: it has moved once
// either no longer holds.
func (c *Cell) handOverSteps(term, epoch uint64, transfer func() error) handOverSteps {
	return handOverSteps{
		record:   c.proposeHandOver,
		cancel:   func(ctx context.Context, epoch uint64) error { return c.proposeHandOver(ctx, epoch, nil) },
		transfer: transfer,
		moved: func() bool {
			active, e := c.sessions.Active()
			return !c.leading(term) || !active || e != epoch
		},
		thaw:  c.sessions.Thaw,
		sleep: time.Sleep,
		log:   c.log,
	}
}

// keepCancelling proposes a hand-over's cancel every handOverRetryEvery
// until it commits (then thaws), the leadership ends or the cell closes;
// every handOverRetransfer tries it asks Raft to move the leadership
// again (either ends the freeze).
func (c *Cell) keepCancelling(s handOverSteps, epoch uint64) {
	defer c.wg.Done()
	for try := 1; ; try++ {
		select {
		case <-c.stop:
			return
		case <-time.After(handOverRetryEvery):
		}
		if settled, _ := cancelOnce(s, epoch); settled {
			c.log.Info("hand-over settled late", "epoch", epoch, "tries", try)
			return
		}
		if try%handOverRetransfer == 0 {
			c.log.Error("hand-over's cancel still not committed: renewals stay held; asking Raft to move the leadership again", "epoch", epoch, "tries", try)
			_ = s.transfer()
		}
	}
}

// proposeHandOver commits hand_over under epoch with the silences (none:
// the cancel).
func (c *Cell) proposeHandOver(ctx context.Context, epoch uint64, silences []session.Silence) error {
	cmd := fsm.Command{Op: fsm.OpHandOver, Epoch: epoch}
	for _, s := range silences {
		cmd.Sessions = append(cmd.Sessions, s.Session)
		cmd.SilentMS = append(cmd.SilentMS, s.SilentMS)
	}
	_, err := c.propose(ctx, &cmd)
	return err
}
