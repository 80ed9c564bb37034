// Package cell runs one cell on a lockd: a replica of its Raft shard on the
// process's NodeHost, the state machine adapter, and the leader-only soft
// state beside it (session manager, watch table). It offers the cell's
// operations to the HTTP layer as plain Go calls.
package cell

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cachers"
	"github.com/lockservice/lockd/server/fsm"
	"github.com/lockservice/lockd/server/session"
	"github.com/lockservice/lockd/server/watch"
)

// Config configures one replica of a cell.
type Config struct {
	// Info names the cell (Name, ShardID). Its prefixes and replicas come
	// from the directory, through SetPlacement.
	Info      api.CellInfo
	ReplicaID uint64
	// Members maps replica id → Raft address for a new cell; ignored on
	// restart and when Join is set.
	Members map[uint64]string
	// Join: this replica was added to a running cell (member add), and
	// catches up from its leader; Learner: it joins without a vote.
	Join, Learner bool
	// ElectionRTT and HeartbeatRTT are in NodeHost ticks (RTTMillisecond).
	ElectionRTT, HeartbeatRTT uint64
	SnapshotEntries           uint64
	CompactionOverhead        uint64
	// EpochFloors are directory epochs this replica's cell must reach
	// before its leader serves anything: a cell restored from a backup
	// holds the lost cell's epochs, and its log continues from the
	// backup's index, so at those epochs it would issue again the tokens
	// the lost cell issued after the backup (lockd restore sets them from
	// the restore plan).
	EpochFloors map[string]uint64
	// LeaderEpochFloor, set on a replica imported from a backup by a
	// restore plan (lockd restore), makes its leader_start carry the plan
	// (restore.go): the first leader after the restore starts at this
	// leader epoch at least and serves only the prefixes of EpochFloors.
	LeaderEpochFloor uint64
	// DefaultLease is given to sessions that do not ask for one.
	DefaultLease time.Duration
	// KeepAlive and Grace, if set, are told to clients at session open:
	// their KeepAlive interval and jeopardy grace (a cell across regions).
	KeepAlive, Grace time.Duration
	// Fanout, if set, is told how many watch events each applied entry that
	// changed a path delivered (a herd shows up as large values).
	Fanout func(prefix string, events int)
	Logger *slog.Logger
}

// Cell is one replica of one cell.
type Cell struct {
	cfg Config
	nh  *dragonboat.NodeHost
	log *slog.Logger
	// onCommit observes every proposal this replica made: how long until
	// it committed and applied (or failed), and whether it did.
	onCommit atomic.Pointer[func(d time.Duration, committed bool)]
	// barrier commits an entry after everything this replica proposed
	// before (settle.go).
	barrier  func(ctx context.Context, epoch uint64) error
	sessions *session.Manager
	watches  *watch.Table
	cachers  *cachers.Table // who caches which node (leader only)
	// invalSent and invalAcked count cache invalidations; grantsRefused
	// the grants a reader's write quota refused (grants.go), which
	// coalesces grant proposals.
	invalSent, invalAcked atomic.Uint64
	grantsRefused         atomic.Uint64
	grants                grantFlights
	confirms              *confirmer // batches KeepAlive ReadIndex rounds
	// snapshots times this replica's snapshot saves and restores.
	snapshots snapshotStats

	leaderID atomic.Uint64 // as last reported by the Raft event listener
	term     atomic.Uint64
	// changed is closed (and replaced) whenever the leader this replica
	// knows of changes or its session manager starts: requests held while
	// the cell had no usable leader (WaitUsable) wake on it.
	changedMu sync.Mutex
	changed   chan struct{}
	// placement is what the directory says of this cell: its replicas'
	// API addresses and the prefixes it serves with their epochs.
	placement atomic.Pointer[Placement]
	adopting  atomic.Bool // an adopt pass is running
	// clock records when this replica applied the latest leader_start, so
	// that its own leader_start can report how long the previous leadership
	// lasted (repeated short fail-overs must not keep a dead session alive).
	clock *session.LeaderClock
	// delays times the end of each lock-delay (delays.go).
	delays *lockDelays

	stopOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup
}

// Start starts (or restarts) the replica on nh. The NodeHost's event
// listener must route this shard's leader updates to LeaderUpdated.
func Start(nh *dragonboat.NodeHost, cfg Config) (*Cell, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DefaultLease <= 0 {
		cfg.DefaultLease = api.DefaultLease
	}
	c := &Cell{cfg: cfg, nh: nh, stop: make(chan struct{}), clock: session.NewLeaderClock(nil), changed: make(chan struct{})}
	c.log = cfg.Logger.With("cell", cfg.Info.Name, "shard", cfg.Info.ShardID)
	c.sessions = session.New(session.Config{Expire: c.proposeExpiry, Tick: c.proposeTick, Confirm: c.proposeConfirm, Logger: c.log})
	c.watches = watch.NewTable(c.sessions)
	c.cachers = cachers.NewWithLimits(cachers.Limits{PerSession: api.MaxCachedPathsPerSession, PerTenant: api.MaxCachedPathsPerTenant,
		MissesPerTenant: api.MaxCacheMissesPerTenant, Exempt: api.BootstrapAdmin})
	c.confirms = newConfirmer(c.read, confirmWindow)
	c.barrier = c.proposeBarrier
	c.delays = newLockDelays(c.log, func(ctx context.Context, dir string, since uint64) error {
		_, err := c.propose(ctx, &fsm.Command{Op: fsm.OpEndLockDelay, Path: dir, Since: since})
		return err
	})

	members := map[uint64]dragonboat.Target{}
	if !cfg.Join && !nh.HasNodeInfo(cfg.Info.ShardID, cfg.ReplicaID) {
		for id, addr := range cfg.Members {
			members[id] = addr
		}
	}
	rc := config.Config{
		ShardID:             cfg.Info.ShardID,
		ReplicaID:           cfg.ReplicaID,
		ElectionRTT:         cfg.ElectionRTT,
		HeartbeatRTT:        cfg.HeartbeatRTT,
		CheckQuorum:         true,
		PreVote:             true,
		SnapshotEntries:     cfg.SnapshotEntries,
		CompactionOverhead:  cfg.CompactionOverhead,
		OrderedConfigChange: true,
		IsNonVoting:         cfg.Learner,
	}
	create := func(shardID, replicaID uint64) sm.IConcurrentStateMachine {
		return &machine{cell: c, state: fsm.New()}
	}
	if err := nh.StartConcurrentReplica(members, cfg.Join && !nh.HasNodeInfo(cfg.Info.ShardID, cfg.ReplicaID), create, rc); err != nil {
		c.sessions.Close()
		c.confirms.close()
		return nil, err
	}
	return c, nil
}

// Close stops the cell's goroutines. The NodeHost stops the shard.
func (c *Cell) Close() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.sessions.Close()
	c.delays.stop()
	c.confirms.close()
	c.wg.Wait()
	c.delays.wait()
}

// HandOff asks Raft to move leadership to another replica if this one leads,
// and waits up to timeout for it to move: a clean stop then costs clients a
// leader change of a few heartbeats, not an election timeout.
func (c *Cell) HandOff(timeout time.Duration) {
	leader, _, valid, err := c.nh.GetLeaderID(c.cfg.Info.ShardID)
	if err != nil || !valid || leader != c.cfg.ReplicaID {
		return
	}
	for id := range c.currentPlacement().APIAddrs {
		if id == c.cfg.ReplicaID {
			continue
		}
		if err := c.nh.RequestLeaderTransfer(c.cfg.Info.ShardID, id); err != nil {
			continue
		}
		deadline := time.Now().Add(timeout)
		for time.Now().Before(deadline) {
			if l, _, ok, _ := c.nh.GetLeaderID(c.cfg.Info.ShardID); ok && l != c.cfg.ReplicaID {
				c.log.Info("leadership handed off", "to", l)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		return
	}
}

// Info names the cell (Name and ShardID).
func (c *Cell) Info() api.CellInfo { return c.cfg.Info }

// ReplicaID is this replica's id in the cell's Raft group.
func (c *Cell) ReplicaID() uint64 { return c.cfg.ReplicaID }

// Learner reports whether this replica started without a vote.
func (c *Cell) Learner() bool { return c.cfg.Learner }

// LeaderUpdated is called by the NodeHost's event listener (one goroutine
// for the whole NodeHost: it must not block).
func (c *Cell) LeaderUpdated(info raftio.LeaderInfo) {
	if prev := c.leaderID.Load(); prev != info.LeaderID || c.term.Load() != info.Term {
		c.log.Info("leader change", "replica", c.cfg.ReplicaID, "leader", info.LeaderID, "previous", prev, "term", info.Term)
	}
	c.leaderID.Store(info.LeaderID)
	c.term.Store(info.Term)
	defer c.signalChange()
	if info.LeaderID == c.cfg.ReplicaID {
		c.wg.Add(1)
		go c.announce(info.Term)
		return
	}
	// Leadership lost (or unknown): stop at once, before anything else.
	c.sessions.Stop()
	c.delays.stop()
	c.watches.Reset()
	c.cachers.Reset()
}

// leading reports whether the listener says this replica leads term.
func (c *Cell) leading(term uint64) bool {
	return c.leaderID.Load() == c.cfg.ReplicaID && c.term.Load() == term
}

// announce commits the epoch floors, then this leader's leader_start
// entry, then the cell's prefixes. The session manager starts when
// leader_start applies, so nothing is served below a floor. A retry after
// a timeout may commit a second copy; the state machine ignores it.
func (c *Cell) announce(term uint64) {
	defer c.wg.Done()
	for attempt := 0; c.leading(term); attempt++ {
		err := c.raiseFloors()
		if err == nil {
			cmd := c.leaderStartCmd(term) // measured afresh: it must precede its commit
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err = c.propose(ctx, &cmd)
			cancel()
			if err == nil {
				break
			}
		}
		c.log.Warn("leader_start not committed", "term", term, "attempt", attempt, "err", err)
		select {
		case <-c.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.adopt()
}

// raiseFloors commits ensure_prefix for every prefix served here below
// its epoch floor. A prefix not served here (moved away since) has none.
func (c *Cell) raiseFloors() error {
	for p, floor := range c.cfg.EpochFloors {
		v, err := c.nh.StaleRead(c.cfg.Info.ShardID, prefixQuery{prefix: p})
		if err != nil {
			return err
		}
		if st := v.(prefixState); st.State != fsm.PrefixServing || st.Epoch >= floor {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = c.propose(ctx, &fsm.Command{Op: fsm.OpEnsurePrefix, Path: p, Epoch: floor})
		cancel()
		if IsRefusal(err) {
			// The read was behind: the prefix is sealed or moved by now,
			// and is not served here at any epoch.
			c.log.Info("epoch floor not raised: the prefix is not served here", "prefix", p, "err", err)
			continue
		}
		if err != nil {
			return err
		}
		c.log.Info("prefix raised to its restore epoch", "prefix", p, "epoch", floor)
	}
	return nil
}

// EpochFloors are the epochs this replica's cell reaches before it serves.
func (c *Cell) EpochFloors() map[string]uint64 { return c.cfg.EpochFloors }

// Placement is what the directory says of a cell.
type Placement struct {
	// APIAddrs maps replica id → API address (not_leader hints, hand-off).
	APIAddrs map[uint64]string
	// Prefixes are the prefixes the directory gives the cell.
	Prefixes map[string]PrefixPlacement
	// Index is the directory index this placement was read at.
	Index uint64
}

// PrefixPlacement is one prefix the directory gives a cell.
type PrefixPlacement struct {
	Epoch uint64 // its directory epoch
	// Leaving: a migration away from this cell is in flight (the prefix
	// may be sealed here and must stay so).
	Leaving bool
	// Arriving: the prefix moved here by a committed migration: it is
	// served only from the staged copy of its nodes.
	Arriving bool
}

// currentPlacement is the placement (empty before the first).
func (c *Cell) currentPlacement() *Placement {
	if p := c.placement.Load(); p != nil {
		return p
	}
	return &Placement{}
}

// SetPlacement records the directory's view of this cell. On the leader,
// a prefix newly given to the cell (or given a higher epoch) is adopted:
// ensure_prefix commits it, and a migration's staged copy is served from
// that entry on.
func (c *Cell) SetPlacement(p Placement) {
	c.placement.Store(&p)
	if active, _ := c.sessions.Active(); active {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.adopt()
		}()
	}
}

// adopt brings the state in line with the placement, on the leader: it
// commits ensure_prefix for every prefix the state does not serve at its
// epoch yet, and unseals a prefix sealed by a migration the directory
// has since abandoned (the unseal names the directory index that says
// so, and the state refuses it if the seal is newer). A prefix sealed for
// a move that committed is no longer in the placement and stays sealed.
// One pass at a time; the next placement runs another.
func (c *Cell) adopt() {
	if !c.adopting.CompareAndSwap(false, true) {
		return
	}
	defer c.adopting.Store(false)
	pl := c.currentPlacement()
	for p, want := range pl.Prefixes {
		if !c.adoptPrefix(p, want, pl.Index) {
			return
		}
	}
}

// adoptPrefix brings one prefix in line; false if this replica stopped
// leading (or the cell is closing), which ends the pass.
func (c *Cell) adoptPrefix(p string, want PrefixPlacement, dirIndex uint64) bool {
	for attempt := 0; attempt < 50; attempt++ {
		if active, _ := c.sessions.Active(); !active {
			return false
		}
		cmd := fsm.Command{Op: fsm.OpEnsurePrefix, Path: p, Epoch: want.Epoch, Staged: want.Arriving, AtMS: time.Now().UnixMilli()}
		if v, err := c.nh.StaleRead(c.cfg.Info.ShardID, prefixQuery{prefix: p}); err == nil {
			st := v.(prefixState)
			switch {
			case st.State == fsm.PrefixStaging,
				st.State == fsm.PrefixServing && st.Epoch >= want.Epoch,
				st.State == fsm.PrefixSealed && (want.Leaving || st.SealDirIndex > dirIndex):
				return true // nothing to do, or nothing it may do
			case st.State == fsm.PrefixSealed:
				cmd = fsm.Command{Op: fsm.OpUnsealPrefix, Path: p, DirIndex: dirIndex, AtMS: time.Now().UnixMilli()}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.propose(ctx, &cmd)
		cancel()
		if err == nil {
			c.log.Info("prefix adopted", "prefix", p, "op", cmd.Op, "epoch", want.Epoch, "directory_index", dirIndex)
			continue // read the state again: an unseal is followed by the epoch check
		}
		if code := api.CodeOf(err); code != api.CodeUnavailable && code != api.CodeNotLeader {
			c.log.Warn("prefix not adopted", "prefix", p, "op", cmd.Op, "err", err)
			return true
		}
		select {
		case <-c.stop:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}

// leaderStartCmd is this replica's leader_start for term, carrying how long
// the previous leadership lasted as this replica saw it (LeaderClock).
func (c *Cell) leaderStartCmd(term uint64) fsm.Command {
	epoch, prev := c.clock.Prev()
	return fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: c.cfg.ReplicaID, Term: term, Epoch: epoch, PrevLeadershipMS: prev, Restored: c.restoreStart()}
}

// afterApply updates the leader-only soft state after an entry applied. It
// runs under dragonboat's write lock on the state, so it is ordered exactly
// with applies and with lookups.
func (c *Cell) afterApply(s *fsm.State, a *fsm.Applied) {
	var by uint64 // a session's own delete: its client learns of it from the reply
	if a.Cmd.Op == fsm.OpDelete {
		by = a.Cmd.Session
	}
	if n := c.watches.Apply(a.Changes, by); len(a.Changes) > 0 && c.cfg.Fanout != nil {
		if active, _ := c.sessions.Active(); active {
			c.cfg.Fanout(api.Prefix(a.Changes[0].Path), n) // one entry changes one prefix
		}
	}
	for _, ch := range a.Changes {
		switch ch.Type {
		case fsm.ChangeLockDelay:
			if d, ok := s.LockDelayOf(ch.Path); ok {
				c.delays.released(ch.Path, d.Since, d.MS, time.Now())
			}
		case fsm.ChangeLockDelayEnded:
			c.delays.ended(ch.Path)
		}
	}
	cmd, res := &a.Cmd, &a.Result
	switch cmd.Op {
	case fsm.OpLeaderStart:
		if res.Err != nil {
			break // a stale leader_start changed nothing
		}
		c.clock.Applied(s.Epoch())
		if cmd.ReplicaID == c.cfg.ReplicaID && c.leading(cmd.Term) {
			if active, epoch := c.sessions.Active(); active && epoch == s.Epoch() {
				break // a second copy of the running leadership's own: keep its leases and watches
			}
			c.watches.Reset()
			c.cachers.Reset()
			c.sessions.Start(s.Epoch(), s.Sessions())
			if api.RestoredLeadership(s.Epoch()) {
				c.sessions.HoldAll()
			}
			c.delays.start(s.Epoch(), s.LockDelays(), time.Now())
			c.signalChange()
		} else {
			c.sessions.Stop()
			c.delays.stop()
			c.watches.Reset()
		}
	case fsm.OpOpenSession:
		// A session's id is the index of the entry that opened it; a
		// retried open answered with an older session keeps that lease.
		if res.Err == nil && res.Session == res.Index {
			c.sessions.Opened(res.Session, res.LeaseMS)
		}
	case fsm.OpCacheSession:
		if res.Err == nil {
			c.sessions.MarkCaches(cmd.Target)
		}
	case fsm.OpCloseSession, fsm.OpExpireSession:
		id := cmd.Session
		if cmd.Op == fsm.OpExpireSession {
			id = cmd.Target
		}
		if s.SessionExists(id) != nil {
			c.sessions.Ended(id)
			c.watches.DropSession(id)
			c.cachers.Forget(id)
		}
	case fsm.OpCreate:
		// A lock node that must wait gets its predecessor watch armed by the
		// same apply: no extra round trip, and no window to miss the delete.
		// A node granted at once gets the holder's watch on its own node
		// instead (deletion by anyone else means the lock is lost), so an
		// uncontended acquire is one request and one commit.
		if res.Err != nil || cmd.Lock == api.LockNone || res.Node == nil {
			break
		}
		if active, epoch := c.sessions.Active(); active && epoch == s.Epoch() {
			if res.WaitFor != "" {
				c.armPredecessor(s, cmd.Session, res.WaitFor)
			} else {
				c.armOwn(s, cmd.Session, res.Node.Path)
			}
		}
	}
}

// armPredecessor arms a waiter's deletion watch on its predecessor. A
// retried create is answered from the dedupe window with the first
// attempt's wait_for, which may have been deleted since: then the deleted
// event fires at once (a watch on a node that is gone would never fire).
// A lock node's path is never reused (its sequence number only grows), so
// "no lock node there" means that predecessor is gone.
func (c *Cell) armPredecessor(s *fsm.State, session uint64, waitFor string) {
	if _, delayed := s.LockDelayOf(waitFor); delayed {
		c.watches.Register(session, tenantOf(s, session), waitFor, api.WatchData) // the lock's directory, in lock-delay
		return
	}
	if exists, _, _, _ := s.LockState(waitFor); exists {
		c.watches.Register(session, tenantOf(s, session), waitFor, api.WatchData)
		return
	}
	c.watches.FireNow(session, api.Event{Type: api.EventDeleted, Path: waitFor, Kind: api.WatchData, Index: s.Index()})
}

// armOwn arms a holder's deletion watch on its own lock node; if the node
// is already gone (a retried create answered from the dedupe window), the
// deleted event fires at once.
func (c *Cell) armOwn(s *fsm.State, session uint64, node string) {
	if exists, _, _, _ := s.LockState(node); exists {
		c.watches.Register(session, tenantOf(s, session), node, api.WatchData)
		return
	}
	c.watches.FireNow(session, api.Event{Type: api.EventDeleted, Path: node, Kind: api.WatchData, Index: s.Index()})
}

// --- Raft plumbing ---

// OnCommit sets the observer of this replica's proposals (metrics).
func (c *Cell) OnCommit(f func(d time.Duration, committed bool)) { c.onCommit.Store(&f) }

func (c *Cell) propose(ctx context.Context, cmd *fsm.Command) (fsm.Result, error) {
	sess := c.nh.GetNoOPSession(c.cfg.Info.ShardID)
	start := time.Now()
	r, err := c.nh.SyncPropose(ctx, sess, cmd.Encode())
	if f := c.onCommit.Load(); f != nil {
		(*f)(time.Since(start), err == nil)
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

func (c *Cell) read(ctx context.Context, q interface{}) (interface{}, error) {
	v, err := c.nh.SyncRead(ctx, c.cfg.Info.ShardID, q)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return nil, &Refusal{ae} // the lookup's own answer
		}
		return nil, raftError(err)
	}
	return v, nil
}

// raftError maps dragonboat's errors onto api codes. Transient ones are
// unavailable: the outcome is unknown and the client retries with the same
// request id. Permanent ones get a code the SDK does not retry; an error
// not listed here is internal (a bug to report, not a reason to retry
// forever).
func raftError(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, dragonboat.ErrTimeout), errors.Is(err, dragonboat.ErrCanceled),
		errors.Is(err, dragonboat.ErrSystemBusy), errors.Is(err, dragonboat.ErrAborted),
		errors.Is(err, dragonboat.ErrShardNotReady), errors.Is(err, dragonboat.ErrShardNotInitialized),
		errors.Is(err, dragonboat.ErrShardClosed), errors.Is(err, dragonboat.ErrClosed),
		errors.Is(err, dragonboat.ErrLogDBNotCreatedOrClosed),
		// The request's deadline had (nearly) passed before Raft saw it: a
		// retry with a fresh deadline can succeed.
		errors.Is(err, dragonboat.ErrInvalidDeadline), errors.Is(err, dragonboat.ErrTimeoutTooSmall):
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
// parked requests costs nothing while it elects.
func (c *Cell) WaitUsable(ctx context.Context, unreachable string) error {
	for {
		ch := c.changes() // before the check, so a change between them is not missed
		err := c.Ready()
		if err == nil || !c.worthWaiting(err, unreachable) {
			return err
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

// Caller is who sent a request, as the API's authentication found: the
// tenant and its quota go into the entry (the state counts and refuses
// per tenant), Admin lets it change another session's ephemeral node.
// The zero Caller is an unauthenticated one with auth off.
type Caller struct {
	Tenant string
	Quota  *api.Quota
	Admin  bool
	// OwnOnly: the caller holds only the lock role here, so may change
	// or delete only its own session's ephemeral nodes.
	OwnOnly bool
	// ParentsFrom: the caller's grant root on the path (fsm.Command's).
	ParentsFrom string
}

func (k Caller) stamp(cmd *fsm.Command) *fsm.Command {
	cmd.Tenant, cmd.Quota, cmd.Admin, cmd.OwnOnly, cmd.ParentsFrom = k.Tenant, k.Quota, k.Admin, k.OwnOnly, k.ParentsFrom
	return cmd
}

// newSecret draws a session secret: 128 random bits, hex.
func newSecret() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("cell: no randomness for a session secret: %v", err)) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// OpenSession opens a session. Its secret is drawn here, on the
// proposer, and goes into the entry (apply draws nothing).
func (c *Cell) OpenSession(ctx context.Context, req api.OpenSessionRequest, who Caller) (api.SessionResponse, error) {
	lease := req.LeaseMS
	if lease <= 0 {
		lease = c.cfg.DefaultLease.Milliseconds()
	}
	cmd := &fsm.Command{Op: fsm.OpOpenSession, LeaseMS: lease, Nonce: req.Nonce, WriteHeader: api.WriteHeader{Secret: newSecret()}}
	res, err := c.propose(ctx, who.stamp(cmd))
	if err != nil {
		return api.SessionResponse{}, err
	}
	return api.SessionResponse{Session: res.Session, Secret: res.Secret, LeaseMS: res.LeaseMS, Epoch: res.Epoch, Index: res.Index,
		KeepAliveMS: c.cfg.KeepAlive.Milliseconds(), GraceMS: c.cfg.Grace.Milliseconds()}, nil
}

// CheckSecret refuses a request naming a session without its secret
// (unauthorized). A session this replica does not know passes: the
// operation reports it as it always has (no_session, session_expired).
// A secret never changes, so this replica's applied state is enough.
func (c *Cell) CheckSecret(session uint64, secret string) error {
	if session == 0 {
		return nil
	}
	return c.checkSecrets([]uint64{session}, []string{secret}, nil)[0]
}

// RenewCheck decides whether a session a tenant opened may be renewed
// (nil error) or is refused (the error answers its KeepAlive).
type RenewCheck func(tenant string) error

// checkSecrets checks sessions' secrets (parallel slices), and with renew
// their tenants, on this replica's state: an error per session.
func (c *Cell) checkSecrets(sessions []uint64, secrets []string, renew RenewCheck) []error {
	v, err := c.nh.StaleRead(c.cfg.Info.ShardID, secretQuery{sessions: sessions, secrets: secrets, renew: renew})
	if err != nil {
		errs := make([]error, len(sessions))
		for i := range errs {
			errs[i] = raftError(err)
		}
		return errs
	}
	return v.([]error)
}

// KeepAlive renews a session and long-polls for its events. The reply is
// sent only after a ReadIndex round confirms this replica still leads under
// the same epoch, so a deposed leader can never extend a lease the new
// leader does not know about. Events leave the session's queue only when a
// later KeepAlive acknowledges them, so a reply that never reaches its
// client loses nothing.
//
// renew, if not nil, decides whether the session's tenant may have it
// renewed (its caller's, and a tenant that still has a token): a refusal
// leaves the lease to run out.
func (c *Cell) KeepAlive(ctx context.Context, req api.KeepAliveRequest, renew RenewCheck) (api.SessionResponse, error) {
	if err := c.checkSecrets([]uint64{req.Session}, []string{req.Secret}, renew)[0]; err != nil {
		return api.SessionResponse{}, err
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxKeepAliveWait)
	_, epoch := c.sessions.Active()
	r, err := c.sessions.Renew(ctx, req.Session, wait, session.Ack{Epoch: req.AckEpoch, Seq: req.AckSeq})
	if errors.Is(err, session.ErrUnknown) {
		// The manager has no lease: ask the state whether it ever existed.
		if _, rerr := c.read(ctx, sessionQuery{session: req.Session, epoch: epoch}); rerr != nil {
			return api.SessionResponse{}, rerr
		}
		return api.SessionResponse{}, api.Errorf(api.CodeUnavailable, "session %d not yet known to the leader", req.Session)
	}
	if err != nil {
		return api.SessionResponse{}, err
	}
	// Events (a hand-off, a watch) go out at once; an idle reply shares a
	// ReadIndex round with others (confirm.go). The caller's ctx may be
	// spent by the long poll; every round ends within its own deadline, so
	// waiting for it needs no timer of its own (one less per KeepAlive).
	index, err := c.confirms.confirm(context.Background(), req.Session, r.Epoch, len(r.Events) > 0 || wait <= 0)
	if err != nil {
		return api.SessionResponse{}, err
	}
	return api.SessionResponse{Session: req.Session, LeaseMS: r.Lease.Milliseconds(), Epoch: r.Epoch, Index: index, Events: r.Events}, nil
}

// KeepAliveBatch renews a lockproxy's sessions on this cell in one call
// and long-polls for their events (session.Manager.RenewBatch). As with
// KeepAlive, it answers only after one ReadIndex round, started after
// the leases were extended, confirms this replica still leads under the
// same epoch and that each session is live.
func (c *Cell) KeepAliveBatch(ctx context.Context, req api.KeepAliveBatchRequest, renew RenewCheck) (api.KeepAliveBatchResponse, error) {
	entries, err := batchEntries(req)
	if err != nil {
		return api.KeepAliveBatchResponse{}, err
	}
	entries, denied, err := c.checkBatchSecrets(req, entries, renew)
	if err != nil {
		return api.KeepAliveBatchResponse{}, err
	}
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, api.MaxBatchWait)
	r, err := c.sessions.RenewBatch(ctx, req.Proxy, req.Epoch, entries, wait)
	if err != nil {
		return api.KeepAliveBatchResponse{}, err
	}
	// Renewed sessions are confirmed, and the state is asked about those
	// without a lease (ended, or not yet known to this leader), in one
	// round; a batch that renewed nothing (a poll for events) needs none.
	if len(r.Renewed)+len(r.Unknown) == 0 {
		return api.KeepAliveBatchResponse{Epoch: r.Epoch, Index: c.appliedIndex(), Sessions: append(r.Reports, denied...)}, nil
	}
	checks := make([]sessionCheck, 0, len(r.Renewed)+len(r.Unknown))
	for _, id := range r.Renewed {
		checks = append(checks, sessionCheck{id, r.Epoch})
	}
	for _, id := range r.Unknown {
		checks = append(checks, sessionCheck{id, r.Epoch})
	}
	urgent := wait <= 0
	for _, rep := range r.Reports {
		urgent = urgent || len(rep.Events) > 0
	}
	cr := c.confirms.confirmAll(context.Background(), checks, urgent)
	if cr.err != nil {
		return api.KeepAliveBatchResponse{}, cr.err
	}
	resp := api.KeepAliveBatchResponse{Epoch: r.Epoch, Index: cr.index}
	failed := map[uint64]*api.Error{}
	for i, chk := range checks {
		switch err := cr.errs[i]; {
		case errors.Is(err, errNotLeading):
			return api.KeepAliveBatchResponse{}, api.Errorf(api.CodeNotLeader, "leadership changed during the keepalive batch")
		case err != nil:
			failed[chk.session] = api.AsError(err)
		case i >= len(r.Renewed):
			failed[chk.session] = api.Errorf(api.CodeUnavailable, "session %d not yet known to the leader", chk.session)
		}
	}
	for _, rep := range r.Reports {
		if _, ok := failed[rep.Session]; !ok {
			resp.Sessions = append(resp.Sessions, rep)
		}
	}
	for id, err := range failed {
		resp.Sessions = append(resp.Sessions, api.BatchSession{Session: id, Error: err})
	}
	resp.Sessions = append(resp.Sessions, denied...)
	return resp, nil
}

// checkBatchSecrets drops from a batch the sessions whose secret it does
// not carry (each answered unauthorized, and not renewed).
func (c *Cell) checkBatchSecrets(req api.KeepAliveBatchRequest, entries []session.BatchEntry, renew RenewCheck) ([]session.BatchEntry, []api.BatchSession, error) {
	secrets := req.Secrets
	if len(secrets) != len(req.Sessions) {
		if len(secrets) != 0 {
			return nil, nil, api.Errorf(api.CodeBadRequest, "keepalive batch: %d sessions but %d secrets", len(req.Sessions), len(secrets))
		}
		secrets = make([]string, len(req.Sessions)) // an older proxy: only sessions without a secret pass
	}
	v, err := c.nh.StaleRead(c.cfg.Info.ShardID, secretQuery{sessions: req.Sessions, secrets: secrets, renew: renew})
	if err != nil {
		return nil, nil, raftError(err)
	}
	errs := v.([]error)
	var denied []api.BatchSession
	kept := entries[:0:0]
	for i, e := range entries {
		if errs[i] != nil {
			denied = append(denied, api.BatchSession{Session: e.Session, Error: api.AsError(errs[i])})
			continue
		}
		kept = append(kept, e)
	}
	if len(denied) == 0 {
		return entries, nil, nil
	}
	return kept, denied, nil
}

// batchEntries checks a batch request and turns it into the manager's entries.
func batchEntries(req api.KeepAliveBatchRequest) ([]session.BatchEntry, error) {
	if req.Proxy == "" {
		return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: no proxy name")
	}
	if len(req.Sessions) != len(req.AgeMS) {
		return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: %d sessions but %d ages", len(req.Sessions), len(req.AgeMS))
	}
	if len(req.Sessions) > api.MaxBatchSessions {
		return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: %d sessions, at most %d", len(req.Sessions), api.MaxBatchSessions)
	}
	entries := make([]session.BatchEntry, len(req.Sessions))
	at := make(map[uint64]int, len(req.Acks))
	for i, id := range req.Sessions {
		if id == 0 || req.AgeMS[i] < 0 {
			return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: session %d with age %d ms", id, req.AgeMS[i])
		}
		entries[i] = session.BatchEntry{Session: id, Age: time.Duration(req.AgeMS[i]) * time.Millisecond}
		at[id] = i
	}
	for _, a := range req.Acks {
		i, ok := at[a.Session]
		if !ok {
			return nil, api.Errorf(api.CodeBadRequest, "keepalive batch: an ack for session %d, which it does not renew", a.Session)
		}
		e := &entries[i]
		e.Ack, e.Seen, e.New = session.Ack{Epoch: a.AckEpoch, Seq: a.AckSeq}, a.Seen, a.New
	}
	return entries, nil
}

// CloseSession ends a session.
func (c *Cell) CloseSession(ctx context.Context, req api.CloseSessionRequest) error {
	_, err := c.propose(ctx, &fsm.Command{Op: fsm.OpCloseSession, WriteHeader: api.WriteHeader{Session: req.Session, Secret: req.Secret},
		AtMS: time.Now().UnixMilli()})
	return err
}

// Create creates a node.
func (c *Cell) Create(ctx context.Context, req api.CreateRequest, who Caller) (api.CreateResponse, error) {
	done, err := c.beforeCreate(ctx, req.Path, req.MakeParents)
	if err != nil {
		return api.CreateResponse{}, err
	}
	res, err := c.propose(ctx, who.stamp(&fsm.Command{
		Op: fsm.OpCreate, WriteHeader: req.WriteHeader, Path: req.Path, Value: req.Value,
		Ephemeral: req.Ephemeral, Sequential: req.Sequential, Lock: req.Lock, MakeParents: req.MakeParents, LockDelayMS: req.LockDelayMS,
	}))
	done(err)
	if err != nil {
		return api.CreateResponse{}, err
	}
	return api.CreateResponse{Node: *res.Node, Index: res.Index, Token: res.Token, WaitFor: res.WaitFor}, nil
}

// Put writes a value, once no client can serve the old one from its cache.
func (c *Cell) Put(ctx context.Context, req api.PutRequest, who Caller) (api.WriteResponse, error) {
	done, err := c.beforeCreate(ctx, req.Path, req.MakeParents, req.Path)
	if err != nil {
		return api.WriteResponse{}, err
	}
	res, err := c.propose(ctx, who.stamp(&fsm.Command{
		Op: fsm.OpPut, WriteHeader: req.WriteHeader, Path: req.Path, Value: req.Value,
		Version: req.Version, MakeParents: req.MakeParents,
	}))
	done(err)
	if err != nil {
		return api.WriteResponse{}, err
	}
	return api.WriteResponse{Node: *res.Node, Index: res.Index}, nil
}

// Delete deletes a node, once no client can serve it from its cache.
func (c *Cell) Delete(ctx context.Context, req api.DeleteRequest, who Caller) (api.WriteResponse, error) {
	done, err := c.beforeDelete(ctx, req.Path)
	if err != nil {
		return api.WriteResponse{}, err
	}
	res, err := c.propose(ctx, who.stamp(&fsm.Command{Op: fsm.OpDelete, WriteHeader: req.WriteHeader, Path: req.Path, Version: req.Version}))
	done(err)
	if err != nil {
		return api.WriteResponse{}, err
	}
	return api.WriteResponse{Node: *res.Node, Index: res.Index}, nil
}

// Get is a linearizable read of a node, optionally arming a watch or
// recording the session as a cacher of it (before the read, so that a
// change racing with it invalidates it).
func (c *Cell) Get(ctx context.Context, req api.ReadRequest, grant GrantCheck) (api.GetResponse, error) {
	if req.Cache {
		// Before the cacher is recorded (an entry): the read's own
		// check comes after it.
		if err := c.CheckSecret(req.Session, req.Secret); err != nil {
			return api.GetResponse{}, err
		}
	}
	epoch := c.registerCacher(ctx, req, grant)
	v, err := c.read(ctx, getQuery{path: req.Path, session: req.Session, secret: req.Secret, watch: req.Watch})
	if err != nil {
		return api.GetResponse{}, err
	}
	resp := v.(api.GetResponse)
	if epoch != 0 && resp.Exists && cacheableNode(resp.Node) {
		resp.Cacheable, resp.Epoch = true, epoch
	}
	return resp, nil
}

// Children is a linearizable list of a node's children.
func (c *Cell) Children(ctx context.Context, req api.ReadRequest) (api.ChildrenResponse, error) {
	v, err := c.read(ctx, childrenQuery{path: req.Path, session: req.Session, secret: req.Secret, watch: req.Watch != ""})
	if err != nil {
		return api.ChildrenResponse{}, err
	}
	return v.(api.ChildrenResponse), nil
}

// LockState re-checks a lock node.
func (c *Cell) LockState(ctx context.Context, req api.LockStateRequest) (api.LockStateResponse, error) {
	v, err := c.read(ctx, lockStateQuery{path: req.Path, session: req.Session, secret: req.Secret, watch: req.Watch})
	if err != nil {
		return api.LockStateResponse{}, err
	}
	return v.(api.LockStateResponse), nil
}

// LockQueue is a lock's holders and waiters, linearizable.
func (c *Cell) LockQueue(ctx context.Context, path string) (api.LockQueueResponse, error) {
	v, err := c.read(ctx, lockQueueQuery{path: path})
	if err != nil {
		return api.LockQueueResponse{}, err
	}
	return v.(api.LockQueueResponse), nil
}

// CheckLock answers whether token holds the lock at path now,
// linearizable: SyncRead is a ReadIndex round on the leader.
func (c *Cell) CheckLock(ctx context.Context, req api.LockCheckRequest) (api.LockCheckResponse, error) {
	v, err := c.read(ctx, lockCheckQuery{path: req.Path, token: req.Token})
	if err != nil {
		return api.LockCheckResponse{}, err
	}
	return v.(api.LockCheckResponse), nil
}

// Watch re-arms watches with the last index the client saw.
func (c *Cell) Watch(ctx context.Context, req api.WatchRequest) (api.WatchResponse, error) {
	v, err := c.read(ctx, watchQuery{session: req.Session, secret: req.Secret, specs: req.Watches})
	if err != nil {
		return api.WatchResponse{}, err
	}
	return v.(api.WatchResponse), nil
}

// Status is this replica's view of the cell, from local state (no ReadIndex:
// it must answer on a replica without quorum).
func (c *Cell) Status() api.ReplicaStatus {
	st := api.ReplicaStatus{Cell: c.cfg.Info.Name, ShardID: c.cfg.Info.ShardID, ReplicaID: c.cfg.ReplicaID, Role: "unknown", Timing: c.cfg.Info.Timing}
	leader, term, valid, err := c.nh.GetLeaderID(c.cfg.Info.ShardID)
	if err == nil && valid {
		st.LeaderID, st.Term = leader, term
		st.LeaderAPI = c.currentPlacement().APIAddrs[leader]
		st.Role = "follower"
		if leader == c.cfg.ReplicaID {
			st.Role = "leader"
		}
	}
	if v, err := c.nh.StaleRead(c.cfg.Info.ShardID, statsQuery{}); err == nil {
		s := v.(stats)
		st.AppliedIndex, st.Epoch, st.Sessions, st.Nodes = s.index, s.epoch, s.sessions, s.nodes
		st.TokenHeadroom = s.tokenHeadroom
	}
	st.RestoredIndex, st.RestoredSHA256 = c.Restored()
	return st
}

// TokenHeadroom is how many more entries this replica's state can apply
// before lock creates are refused (token_exhausted), and false if the
// state cannot be read (replica not started).
func (c *Cell) TokenHeadroom() (uint64, bool) {
	v, err := c.nh.StaleRead(c.cfg.Info.ShardID, statsQuery{})
	if err != nil {
		return 0, false
	}
	return v.(stats).tokenHeadroom, true
}

// Counters are the cell's metrics sources.
type Counters struct {
	Leases, ArmedWatches                int
	KeepAlives, Expiries, DroppedEvents uint64
	WatchEvents                         uint64
	// KeepAliveRounds counts the ReadIndex rounds that confirmed KeepAlives
	// (one per batch: KeepAlives / rounds is the batching factor).
	KeepAliveRounds uint64
	// KeepAliveBatches counts proxies' batches, BatchedSessions the
	// sessions they renewed.
	KeepAliveBatches, BatchedSessions uint64
}

// Counters reads the cell's counters.
func (c *Cell) Counters() Counters {
	var k Counters
	k.Leases, k.KeepAlives, k.Expiries, k.DroppedEvents = c.sessions.Stats()
	k.ArmedWatches, k.WatchEvents = c.watches.Stats()
	k.KeepAliveRounds = c.confirms.Rounds()
	k.KeepAliveBatches, k.BatchedSessions = c.sessions.BatchStats()
	return k
}
