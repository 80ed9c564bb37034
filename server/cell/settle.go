package cell

// A change whose proposal failed without a verdict (a timeout, a lost
// leadership) may still commit: Raft may have appended it. Until its
// fate is known its node stays uncacheable, so that no reader caches the
// old value and is then never invalidated.

import (
	"context"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// settleTimeout bounds one barrier proposal (long: on a slow disk a
// short one would time out every time, though each commits later);
// settleBackoff is the pause between two.
const (
	settleTimeout = 30 * time.Second
	settleBackoff = 200 * time.Millisecond
)

// finish returns the done of a change: called with the proposal's error,
// it runs end at once if the change applied or was refused, and
// otherwise once the change's fate is known (settle).
func (c *Cell) finish(end func()) func(error) {
	return func(err error) {
		if err == nil || IsRefusal(err) || mutant.On(mutant.CacheSettle) {
			end()
			return
		}
		go c.settle(end)
	}
}

// settle runs end once an entry proposed before now is decided: a barrier
// (an empty confirm under this leadership's epoch) applied after it, in
// the same leadership, so the change was applied before it or never will
// be; or this leadership ended, and the next one on this replica starts
// only after its leader_start applied, which decides every earlier entry.
// Barriers are tried api.MaxSettleAttempts times; if none commits, the
// node stays uncacheable until the leadership ends.
func (c *Cell) settle(end func()) {
	defer end()
	active, epoch := c.sessions.Active()
	if !active {
		return
	}
	stopped := c.sessions.Stopped(epoch)
	for i := 0; i < api.MaxSettleAttempts; i++ {
		err := c.barrierUntil(stopped, epoch)
		if err == nil {
			return
		}
		t := time.NewTimer(settleBackoff)
		select {
		case <-stopped:
			t.Stop()
			return
		case <-t.C:
		}
	}
	c.log.Warn("a change's outcome is still unknown: its node stays uncacheable until this leadership ends")
	<-stopped
}

// proposeBarrier commits an empty confirm under epoch. Applied, refused
// or not (a later epoch's state refuses it), it is decided: nil.
func (c *Cell) proposeBarrier(ctx context.Context, epoch uint64) error {
	_, err := c.propose(ctx, &fsm.Command{Op: fsm.OpConfirm, Epoch: epoch})
	if IsRefusal(err) {
		return nil
	}
	return err
}

// barrierUntil runs one barrier, for at most settleTimeout and no longer
// than the leadership (stopped).
func (c *Cell) barrierUntil(stopped <-chan struct{}, epoch uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	go func() {
		select {
		case <-stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	return c.barrier(ctx, epoch)
}
