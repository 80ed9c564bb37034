package cell

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/fsm"
)

// OnCommit sets the observer of this replica's proposals (metrics).
func (c *Cell) OnCommit(f func(d time.Duration, committed bool)) { c.onCommit.Store(&f) }

func (c *Cell) propose(ctx context.Context, cmd *fsm.Command) (fsm.Result, error) {
	tr := traceOf(ctx)
	if tr != nil {
		tr.Mark(MarkFenced)
		c.applies.waiting.Add(1)
		defer c.applies.waiting.Add(-1)
	}
	sess := c.nh.GetNoOPSession(c.cfg.Info.ShardID)
	data := c.encodeProposal(cmd)     // in the state's codec (codec.go)
	ctx, stop := c.inflight.bind(ctx) // inflight.go: bound to this replica's leadership, if it leads
	defer stop()
	tr.Mark(MarkPropose)
	start := time.Now()
	r, err := c.nh.SyncPropose(ctx, sess, data)
	if tr != nil {
		tr.Mark(MarkReturned)
		c.applies.copyTo(tr, r.Value)
	}
	took := time.Since(start)
	if err == nil {
		c.recent.commits.Add(start.Add(took), took.Seconds()*1000)
	} else {
		c.recent.failures.Add(start.Add(took), 1)
	}
	if f := c.onCommit.Load(); f != nil {
		(*f)(took, err == nil)
	}
	if errors.Is(err, dragonboat.ErrCanceled) && errors.Is(context.Cause(ctx), errLeadershipLost) {
		return fsm.Result{}, api.Errorf(api.CodeUnavailable, "replica %d lost the leadership of cell %s while the entry was in flight (it may yet commit under the next leader)", c.cfg.ReplicaID, c.cfg.Info.Name)
	}
	if err != nil {
		return fsm.Result{}, raftError(err)
	}
	res, err := fsm.DecodeResult(r.Data)
	if err != nil {
		return fsm.Result{}, api.Errorf(api.CodeInternal, "undecodable result: %v", err)
	}
	if res.Err != nil {
		return res, &Refusal{res.Err}
	}
	return res, nil
}

// Refusal is the state machine's verdict on a command or query it
// refused: unlike an error of Raft's (a timeout may still apply), it is
// final, and the command applied nothing.
type Refusal struct{ Err *api.Error }

func (r *Refusal) Error() string { return r.Err.Error() }

// Unwrap gives the *api.Error to errors.As and errors.Is.
func (r *Refusal) Unwrap() error { return r.Err }

// IsRefusal reports whether err is the state machine's own refusal.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// read runs q on this replica's state after a ReadIndex round
// (linearizable: on the leader, SyncRead). The query's own refusal comes
// back a Refusal, Raft's errors mapped by raftError.
func read[R any](ctx context.Context, c *Cell, q func(*fsm.State) (R, error)) (R, error) {
	v, err := c.nh.SyncRead(ctx, c.cfg.Info.ShardID, erase(q))
	if err != nil {
		var zero R
		var ae *api.Error
		if errors.As(err, &ae) {
			return zero, &Refusal{ae} // the query's own answer
		}
		return zero, raftError(err)
	}
	return v.(R), nil
}

// readLocal runs q on this replica's applied state as it is (StaleRead:
// no ReadIndex, possibly behind the leader). Its error is dragonboat's or
// the query's, unmapped.
func readLocal[R any](c *Cell, q func(*fsm.State) (R, error)) (R, error) {
	v, err := c.nh.StaleRead(c.cfg.Info.ShardID, erase(q))
	if err != nil {
		var zero R
		return zero, err
	}
	return v.(R), nil
}

// raftError maps dragonboat's errors onto api codes. Transient ones are
// unavailable: the outcome is unknown and the client retries with the same
// request id; those that say the entry never entered any log (notInLog)
// are marked not applied, so that even a write without a request id is
// sent again rather than reported outcome-unknown. Permanent ones get a
// code the SDK does not retry; an error not listed here is internal (a
// bug to report, not a reason to retry forever).
func raftError(err error) error {
	switch {
	case notInLog(err) || mutant.On(mutant.TimeoutNotApplied) && errors.Is(err, dragonboat.ErrTimeout):
		return &api.Error{Code: api.CodeUnavailable, NotApplied: true, Message: err.Error() + " (not proposed: send again)"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, dragonboat.ErrTimeout), errors.Is(err, dragonboat.ErrCanceled),
		errors.Is(err, dragonboat.ErrAborted),
		errors.Is(err, dragonboat.ErrShardClosed), errors.Is(err, dragonboat.ErrClosed),
		errors.Is(err, dragonboat.ErrLogDBNotCreatedOrClosed):
		return api.Errorf(api.CodeUnavailable, "%v", err)
	case errors.Is(err, dragonboat.ErrReplicaRemoved):
		// This replica left the shard; another one may serve it.
		return api.Errorf(api.CodeNotLeader, "replica removed from the cell: %v", err)
	case errors.Is(err, dragonboat.ErrShardNotFound):
		return api.Errorf(api.CodeWrongCell, "shard not on this host")
	case errors.Is(err, dragonboat.ErrPayloadTooBig):
		return api.Errorf(api.CodeValueTooLarge, "entry too large for the log: %v", err)
	}
	// ErrRejected (a client session we do not use), ErrDeadlineNotSet,
	// ErrInvalidSession, ErrInvalidOperation and anything new.
	return api.Errorf(api.CodeInternal, "raft: %v", err)
}

// notInLog reports whether err says the entry entered no Raft log, so it
// can never apply: refused before it was proposed (the shard not ready or
// not initialized here, its queues full, a deadline already past) or
// dropped by Raft without being appended or forwarded (no leader known,
// a candidate, a leader handing over: dragonboat's Dropped, which
// SyncPropose returns as ErrShardNotReady).
func notInLog(err error) bool {
	return errors.Is(err, dragonboat.ErrShardNotReady) || errors.Is(err, dragonboat.ErrShardNotInitialized) ||
		errors.Is(err, dragonboat.ErrSystemBusy) ||
		// The request's deadline had (nearly) passed before Raft saw it: a
		// retry with a fresh deadline can succeed.
		errors.Is(err, dragonboat.ErrInvalidDeadline) || errors.Is(err, dragonboat.ErrTimeoutTooSmall)
}

func (c *Cell) proposeExpiry(ctx context.Context, id, epoch uint64) error {
	_, err := c.propose(ctx, &fsm.Command{Op: fsm.OpExpireSession, Target: id, Epoch: epoch, AtMS: time.Now().UnixMilli()})
	if errors.Is(err, api.ErrSessionExpired) || errors.Is(err, api.ErrNoSession) {
		return nil // already gone
	}
	return err
}

func (c *Cell) proposeTick(ctx context.Context, epoch uint64, elapsed time.Duration) error {
	_, err := c.propose(ctx, &fsm.Command{Op: fsm.OpLeaderTick, Epoch: epoch, ElapsedMS: elapsed.Milliseconds()})
	return err
}

func (c *Cell) proposeConfirm(ctx context.Context, epoch uint64, sessions []uint64) error {
	_, err := c.propose(ctx, &fsm.Command{Op: fsm.OpConfirm, Epoch: epoch, Sessions: sessions})
	return err
}

// --- leadership as the API sees it ---

// Ready returns nil if this replica leads and its session manager runs;
// otherwise not_leader with the leader's API address when known, or
// unavailable while a new leader is starting.
func (c *Cell) Ready() error {
	if active, _ := c.sessions.Active(); active {
		return nil
	}
	leader := c.leaderID.Load()
	if leader == c.cfg.ReplicaID {
		return api.Errorf(api.CodeUnavailable, "leader of cell %s is starting", c.cfg.Info.Name)
	}
	e := api.Errorf(api.CodeNotLeader, "replica %d does not lead cell %s", c.cfg.ReplicaID, c.cfg.Info.Name)
	if leader != 0 {
		e.Leader = c.currentPlacement().APIAddrs[leader]
	}
	return e
}

// signalChange wakes the requests held in WaitUsable.
func (c *Cell) signalChange() {
	c.changedMu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.changedMu.Unlock()
}

func (c *Cell) changes() <-chan struct{} {
	c.changedMu.Lock()
	defer c.changedMu.Unlock()
	return c.changed
}

// WaitUsable is Ready for a request that would otherwise be sent away
// useless during a fail-over: when this replica knows no leader, or only
// one the client says it cannot reach (unreachable: API addresses,
// comma-separated, "" if none), or leads but is still starting, it waits — until
// that changes or ctx ends — and answers as Ready does then. The client is
// told of the new leader the moment this replica learns of it, instead of
// polling with backoff through the election (1 to 2 s), and a cell of
// parked requests costs nothing while it elects. A leader elected while
// it waited at an address the client could not reach (a process restarted
// there and won) is named with Elected set.
func (c *Cell) WaitUsable(ctx context.Context, unreachable string) error {
	term := c.term.Load()
	for {
		ch := c.changes() // before the check, so a change between them is not missed
		// The term before the leader Ready names: LeaderUpdated stores the
		// leader, then the term, so a term read here that is newer is
		// that leader's own (or a later one's), never a deposed one's.
		now := c.term.Load()
		err := c.Ready()
		if err == nil || !c.worthWaiting(err, unreachable) {
			return err
		}
		if ae := (*api.Error)(nil); errors.As(err, &ae) && ae.Leader != "" && now > term && !mutant.On(mutant.ReelectedUnsaid) {
			ae.Elected = true // Ready's error is this call's own
			return ae
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return err
		case <-c.stop:
			return err
		}
	}
}

func (c *Cell) worthWaiting(err error, unreachable string) bool {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Code {
	case api.CodeUnavailable: // this replica leads and is starting
		return true
	case api.CodeNotLeader:
		return ae.Leader == "" || slices.Contains(strings.Split(unreachable, ","), ae.Leader)
	}
	return false
}

// --- operations ---
