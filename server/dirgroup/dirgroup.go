// Package dirgroup runs a replica of the directory group on a lockd's
// NodeHost: the directory's state machine (package dirfsm) behind
// dragonboat, and the calls the lockd makes on it. The directory is small
// (a few entries per cell and prefix), so it is a plain IStateMachine.
package dirgroup

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync/atomic"

	"github.com/lockservice/lockd/server/dirfsm"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// Group is this lockd's replica of the directory group.
type Group struct {
	nh        *dragonboat.NodeHost
	replicaID uint64
	// applied is bumped after every applied entry: the lockd's directory
	// view polls it to notice changes without reading the state.
	applied atomic.Uint64
}

// Config starts the replica.
type Config struct {
	ReplicaID uint64
	// Members are the initial members (replica id = lockd id → raft
	// address) for a new group; ignored on restart.
	Members                   map[uint64]string
	ElectionRTT, HeartbeatRTT uint64
}

// Start starts (or restarts) the directory replica on nh.
func Start(nh *dragonboat.NodeHost, cfg Config) (*Group, error) {
	g := &Group{nh: nh, replicaID: cfg.ReplicaID}
	members := map[uint64]dragonboat.Target{}
	if !nh.HasNodeInfo(directory.ShardID, cfg.ReplicaID) {
		for id, addr := range cfg.Members {
			members[id] = addr
		}
	}
	rc := config.Config{
		ShardID: directory.ShardID, ReplicaID: cfg.ReplicaID,
		ElectionRTT: cfg.ElectionRTT, HeartbeatRTT: cfg.HeartbeatRTT,
		CheckQuorum: true, PreVote: true,
		SnapshotEntries: 10_000, CompactionOverhead: 1_000,
		OrderedConfigChange: true,
	}
	create := func(_, _ uint64) sm.IStateMachine { return &machine{g: g, state: dirfsm.NewState()} }
	if err := nh.StartReplica(members, false, create, rc); err != nil {
		return nil, err
	}
	return g, nil
}

// Applied is the index of the last entry this replica applied.
func (g *Group) Applied() uint64 { return g.applied.Load() }

// Propose commits one directory command (from any replica: a follower
// forwards it to the leader) and returns its result; a refused command
// returns its *api.Error.
func (g *Group) Propose(ctx context.Context, c *dirfsm.Command) (dirfsm.Result, error) {
	r, err := g.nh.SyncPropose(ctx, g.nh.GetNoOPSession(directory.ShardID), c.Encode())
	if err != nil {
		return dirfsm.Result{}, RaftError(err)
	}
	var res dirfsm.Result
	if err := json.Unmarshal(r.Data, &res); err != nil {
		return res, api.Errorf(api.CodeInternal, "undecodable directory result: %v", err)
	}
	if res.Err != nil {
		return res, res.Err
	}
	return res, nil
}

// Read is a linearizable read of the whole directory.
func (g *Group) Read(ctx context.Context) (api.DirectoryResponse, error) {
	v, err := g.nh.SyncRead(ctx, directory.ShardID, nil)
	if err != nil {
		return api.DirectoryResponse{}, RaftError(err)
	}
	return v.(api.DirectoryResponse), nil
}

// Local is this replica's copy of the directory, without a quorum round
// (possibly behind the leader's).
func (g *Group) Local() (api.DirectoryResponse, bool) {
	v, err := g.nh.StaleRead(directory.ShardID, nil)
	if err != nil {
		return api.DirectoryResponse{}, false
	}
	return v.(api.DirectoryResponse), true
}

// Leader is the replica (= lockd id) leading the group, if known.
func (g *Group) Leader() (uint64, bool) {
	id, _, ok, err := g.nh.GetLeaderID(directory.ShardID)
	return id, ok && err == nil
}

// RaftError maps dragonboat's errors on the directory group to api codes:
// transient ones are unavailable (the caller retries).
func RaftError(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, dragonboat.ErrTimeout), errors.Is(err, dragonboat.ErrCanceled),
		errors.Is(err, dragonboat.ErrSystemBusy), errors.Is(err, dragonboat.ErrAborted),
		errors.Is(err, dragonboat.ErrShardNotReady), errors.Is(err, dragonboat.ErrShardClosed),
		errors.Is(err, dragonboat.ErrClosed), errors.Is(err, dragonboat.ErrInvalidDeadline),
		errors.Is(err, dragonboat.ErrTimeoutTooSmall), errors.Is(err, dragonboat.ErrShardNotInitialized):
		return api.Errorf(api.CodeUnavailable, "directory: %v", err)
	}
	return api.Errorf(api.CodeInternal, "directory: %v", err)
}

// machine adapts dirfsm.State to dragonboat.
type machine struct {
	g     *Group
	state *dirfsm.State
}

func (m *machine) Update(e sm.Entry) (sm.Result, error) {
	out := m.state.Apply(e.Index, e.Cmd)
	m.g.applied.Store(e.Index)
	return sm.Result{Value: e.Index, Data: out}, nil
}

func (m *machine) Lookup(_ interface{}) (interface{}, error) {
	return m.state.Response(), nil
}

func (m *machine) SaveSnapshot(w io.Writer, _ sm.ISnapshotFileCollection, _ <-chan struct{}) error {
	return m.state.Save(w)
}

func (m *machine) RecoverFromSnapshot(r io.Reader, _ []sm.SnapshotFile, _ <-chan struct{}) error {
	if err := m.state.Load(r); err != nil {
		return err
	}
	m.g.applied.Store(m.state.Index())
	return nil
}

func (m *machine) Close() error { return nil }
