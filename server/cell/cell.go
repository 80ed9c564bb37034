// Package cell runs one cell on a lockd: a replica of its Raft shard on the
// process's NodeHost, the state machine adapter, and the leader-only soft
// state beside it (session manager, watch table). It offers the cell's
// operations to the HTTP layer as plain Go calls.
package cell

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
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
	// JSONLog: propose every entry in JSON whatever the cell's log codec,
	// and never raise it (a test's stand-in for a build from before the
	// binary codec: lockd --log-codec-max 0).
	JSONLog bool
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
	// recent is the soft state the health assessment reads (health.go).
	recent recentState
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

	// applies times the leader's applies while a traced proposal waits
	// (trace.go).
	applies applyClock

	// logCodec is the applied state's log codec, which proposals are
	// encoded in; ungated counts entries applied above it (codec.go).
	logCodec atomic.Uint32
	ungated  atomic.Uint64
	// handOvers counts this replica's planned hand-overs whose
	// leadership moved; handOversFailed those that did not (handover.go).
	handOvers, handOversFailed atomic.Uint64

	leaderID atomic.Uint64 // as last reported by the Raft event listener
	term     atomic.Uint64
	// inflight ends the proposals of a leadership once it has ended and
	// their fate is decided (inflight.go); rtt is one Raft tick.
	inflight leaderBound
	rtt      time.Duration
	// changed is closed (and replaced) whenever the leader this replica
	// knows of changes or its session manager starts: requests held while
	// the cell had no usable leader (WaitUsable) wake on it.
	changedMu sync.Mutex
	changed   chan struct{}
	// placement is what the directory says of this cell: its replicas'
	// API addresses and the prefixes it serves with their epochs.
	placement atomic.Pointer[Placement]
	// adopts runs adopt passes one at a time, none lost (placement.go).
	adopts rerun
	// clock records when this replica applied the latest leader_start, so
	// that its own leader_start can report how long the previous leadership
	// lasted (repeated short fail-overs must not keep a dead session alive).
	clock *session.LeaderClock
	// delays times the end of each lock-delay (delays.go).
	delays *lockDelays
	// changeWaiters are the change-feed long polls held (changefeed.go).
	changeWaiters changeWaiters

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
	c := &Cell{cfg: cfg, nh: nh, stop: make(chan struct{}), clock: session.NewLeaderClock(nil), changed: make(chan struct{}),
		rtt: time.Duration(nh.NodeHostConfig().RTTMillisecond) * time.Millisecond}
	c.log = cfg.Logger.With("cell", cfg.Info.Name, "shard", cfg.Info.ShardID)
	c.sessions = session.New(session.Config{Expire: c.proposeExpiry, Tick: c.proposeTick, Confirm: c.proposeConfirm, Logger: c.log})
	c.watches = watch.NewTable(c.sessions)
	c.cachers = cachers.NewWithLimits(cachers.Limits{PerSession: api.MaxCachedPathsPerSession, PerTenant: api.MaxCachedPathsPerTenant,
		MissesPerTenant: api.MaxCacheMissesPerTenant, Exempt: api.BootstrapAdmin})
	c.confirms = newConfirmer(c.readSessions, confirmWindow)
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

// Info names the cell (Name and ShardID).
func (c *Cell) Info() api.CellInfo { return c.cfg.Info }

// ReplicaID is this replica's id in the cell's Raft group.
func (c *Cell) ReplicaID() uint64 { return c.cfg.ReplicaID }

// Learner reports whether this replica started without a vote.
func (c *Cell) Learner() bool { return c.cfg.Learner }

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
	// One read of the state for the figures and the health's.
	s, err := readLocal(c, statusOf)
	if err == nil {
		st.AppliedIndex, st.Epoch, st.Sessions, st.Nodes = s.index, s.epoch, s.sessions, s.nodes
		st.TokenHeadroom = s.tokenHeadroom
		st.Staged, st.Usage = s.health.staged, s.health.usage
	}
	st.RestoredIndex, st.RestoredSHA256 = c.Restored()
	st.LogCodec, st.UngatedEntries = uint8(c.LogCodec()), c.UngatedEntries()
	c.healthStatus(&st)
	return st
}

// TokenHeadroom is how many more entries this replica's state can apply
// before lock creates are refused (token_exhausted), and false if the
// state cannot be read (replica not started).
func (c *Cell) TokenHeadroom() (uint64, bool) {
	s, err := readLocal(c, statsOf)
	if err != nil {
		return 0, false
	}
	return s.tokenHeadroom, true
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
	// HandOvers counts the planned hand-overs (handover.go) whose
	// leadership moved, HandOversFailed those whose did not.
	HandOvers, HandOversFailed uint64
}

// Counters reads the cell's counters.
func (c *Cell) Counters() Counters {
	var k Counters
	k.Leases, k.KeepAlives, k.Expiries, k.DroppedEvents = c.sessions.Stats()
	k.ArmedWatches, k.WatchEvents = c.watches.Stats()
	k.KeepAliveRounds = c.confirms.Rounds()
	k.KeepAliveBatches, k.BatchedSessions = c.sessions.BatchStats()
	k.HandOvers, k.HandOversFailed = c.handOvers.Load(), c.handOversFailed.Load()
	return k
}
