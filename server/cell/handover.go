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
	// handOverCancelAttempts bounds the cancel's proposals; past them
	// the leader stays frozen (it renews nothing it could not pass on)
	// and asks Raft to move the leadership once more.
	handOverCancelAttempts = 10
	// handOverPoll is how often the hand-over looks whether the
	// leadership moved.
	handOverPoll = 20 * time.Millisecond
)

// handOverSteps are a hand-over's effects, apart so that its order is
// tested on its own (TestHandOverCancelsBeforeThaw).
type handOverSteps struct {
	// record commits the silences (hand_over); cancel commits an empty
	// one. Both under the leadership's epoch.
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
// cancels the record and only then thaws the manager.
func runHandOver(s handOverSteps, epoch uint64, silences []session.Silence, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), handOverCommitTimeout)
	err := s.record(ctx, epoch, silences)
	cancel()
	if err == nil {
		err = s.transfer()
	}
	if err == nil {
		if err = awaitMove(s, wait); err == nil {
			return nil
		}
	}
	cancelHandOver(s, epoch)
	return err
}

// awaitMove waits up to wait for the leadership to leave this replica.
func awaitMove(s handOverSteps, wait time.Duration) error {
	for waited := time.Duration(0); waited < wait; waited += handOverPoll {
		if s.moved() {
			return nil
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
// it committed, comes before the cancel in the log.
func cancelHandOver(s handOverSteps, epoch uint64) {
	if mutant.On(mutant.HandOverUncancelled) {
		s.thaw(epoch) // broken: the record stays for the next leader
		return
	}
	for attempt := 0; attempt < handOverCancelAttempts; attempt++ {
		if s.moved() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), handOverCommitTimeout)
		err := s.cancel(ctx, epoch)
		cancel()
		if err == nil {
			s.thaw(epoch)
			return
		}
		if IsRefusal(err) {
			return // a later leadership: this one's manager has stopped
		}
		s.log.Warn("hand-over's cancel not committed", "epoch", epoch, "attempt", attempt, "err", err)
		s.sleep(100 * time.Millisecond)
	}
	s.log.Error("hand-over's cancel never committed: renewals stay held; asking Raft to move the leadership again", "epoch", epoch)
	_ = s.transfer()
}

// handOverTo moves this cell's leadership, held here, to replica to, and
// waits up to wait for it to move. A replica that does not lead, or a
// cell whose log codec is below V4 (a replica of an older build could not
// apply hand_over), makes a plain transfer request.
func (c *Cell) handOverTo(to uint64, wait time.Duration) error {
	if to == c.cfg.ReplicaID {
		return nil
	}
	term := c.term.Load()
	steps := handOverSteps{
		record: c.proposeHandOver,
		cancel: func(ctx context.Context, epoch uint64) error { return c.proposeHandOver(ctx, epoch, nil) },
		transfer: func() error {
			if err := c.nh.RequestLeaderTransfer(c.cfg.Info.ShardID, to); err != nil {
				return raftError(err)
			}
			return nil
		},
		moved: func() bool { return !c.leading(term) },
		thaw:  c.sessions.Thaw,
		sleep: time.Sleep,
		log:   c.log,
	}
	if active, _ := c.sessions.Active(); !active || c.LogCodec() < fsm.LogCodecV4 || mutant.On(mutant.HandOverSkipped) {
		if err := steps.transfer(); err != nil {
			return err
		}
		return awaitMove(steps, wait)
	}
	epoch, silences, err := c.sessions.HandOver()
	if err != nil {
		return err
	}
	err = runHandOver(steps, epoch, silences, wait)
	if err == nil {
		c.log.Info("leadership handed over", "to", to, "sessions", len(silences))
	}
	return err
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
