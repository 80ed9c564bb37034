package fsm

import (
	"fmt"

	"github.com/lockservice/lockd/api"
)

// State is the cell's namespace and sessions.
type State struct {
	index      uint64 // last applied Raft index
	epoch      uint64 // leader epoch: number of leader_start entries applied
	leaderID   uint64 // replica that committed the last leader_start
	leaderTerm uint64
	// leaderElapsedMS is how long the current leader has led, as its
	// leader_tick entries recorded.
	leaderElapsedMS int64
	root            *node
	nodes           map[string]*node // every node but the root, by path
	sessions        map[uint64]*session
	ended           map[uint64]struct{}
	endedOrder      []uint64 // FIFO of ended ids, oldest first
	// opens maps the nonce of each of the last api.MaxOpenNonces session
	// opens to the session it opened (openOrder: those opens, oldest
	// first), so that a retried open returns that session.
	opens     map[string]uint64
	openOrder []openNonce
	// lockDelays are the lock-delays of lock directories deleted while in
	// one, by path, until the leader ends them (lockdelay.go).
	lockDelays map[string]*lockDelay
	// keptBy counts lockDelays by the tenant owning each deleted
	// directory (derived: kept by putKept and dropKept; "" not counted).
	keptBy map[string]int
	// cachedBy indexes the sessions' cache records by path (derived:
	// rebuilt from the sessions on restore; cachepaths.go).
	cachedBy map[string]map[uint64]struct{}
	// frozen is the snapshot being written while applies continue, if
	// any: a change to a node it holds keeps the node's old image first
	// (touch). Soft: never part of the state's content or its snapshot.
	frozen *Frozen
	// bytes is the sum of every node's path and value (derived: rebuilt
	// from the nodes when a snapshot is read); limits the named per-cell
	// limits it enforces.
	bytes  int64
	limits cellLimits
	// tenants is each tenant's usage, for its quota (derived, like bytes).
	tenants map[string]*usage
	// codec is the log codec the cell's entries are written in, raised by
	// set_codec (codecgate.go); stored dedupe answers are kept in it.
	codec LogCodec
	// containerSeq is at least the sequence counter of every container
	// deleted so far: a new container's counter starts there
	// (container.go). It only rises.
	containerSeq uint64
	// handover is the silence of each session as the leader that handed
	// its leadership over measured it (handover.go): the next
	// leader_start charges it. Empty outside a hand-over.
	handover handOver
	// ring is the change ring (changes.go): soft, an output of apply
	// only, never part of the state's content or its snapshot.
	ring *changeRing
}

// New returns an empty state: just the root.
func New() *State {
	return &State{
		root:     &node{path: "/"},
		nodes:    map[string]*node{},
		sessions: map[uint64]*session{},
		ended:    map[uint64]struct{}{},
		opens:    map[string]uint64{},
		limits:   defaultLimits,
		tenants:  map[string]*usage{},
		ring:     newChangeRing(1),
	}
}

// Index is the last applied Raft index.
func (s *State) Index() uint64 { return s.index }

// Epoch is the leader epoch: it grows by one with every leader_start.
func (s *State) Epoch() uint64 { return s.epoch }

// Leader is the replica and term of the last leader_start.
func (s *State) Leader() (replicaID, term uint64) { return s.leaderID, s.leaderTerm }

// NumNodes is the number of nodes, prefix roots included.
func (s *State) NumNodes() int { return len(s.nodes) }

// NumSessions is the number of live sessions.
func (s *State) NumSessions() int { return len(s.sessions) }

// Applied is one applied entry: the command as decoded, its result, the
// result encoded for the proposer, and the paths it changed. The runtime
// beside the state machine reads it instead of decoding the entry again.
type Applied struct {
	Cmd     Command
	Result  Result
	Encoded []byte
	Changes []Change
}

// Apply applies the command encoded in data, committed at index, and returns
// the encoded Result and the paths it changed. See ApplyEntry.
func (s *State) Apply(index uint64, data []byte) ([]byte, []Change) {
	a := s.ApplyEntry(index, data)
	return a.Encoded, a.Changes
}

// ApplyEntry applies the command encoded in data, committed at index. A
// command that cannot be decoded or is refused changes no node and no
// session state, except that a session-scoped request still records its
// (error) result for dedupe and applies its ack: a retry must get the same
// answer.
func (s *State) ApplyEntry(index uint64, data []byte) Applied {
	if index <= s.index {
		panic(fmt.Sprintf("fsm: apply index %d after %d", index, s.index))
	}
	s.index = index
	cmd, err := DecodeCommand(data)
	if err != nil {
		return refused(index, Command{}, api.Errorf(api.CodeBadRequest, "undecodable entry: %v", err))
	}
	// A write naming a session is the session's only with its secret.
	if cmd.Session != 0 && cmd.Request == 0 && isDedupedOp(cmd.Op) {
		if _, serr := s.authSession(&cmd); serr != nil {
			return refused(index, cmd, serr)
		}
	}
	// Session-scoped writes with a request id are deduplicated: a retry gets
	// the first attempt's result and is never applied twice.
	if cmd.Session != 0 && cmd.Request != 0 && isDedupedOp(cmd.Op) {
		sess, serr := s.authSession(&cmd)
		if serr != nil {
			return refused(index, cmd, serr)
		}
		sess.ack(cmd.Ack)
		if cmd.Request < sess.ackedBelow {
			return refused(index, cmd, api.Errorf(api.CodeStaleRequest, "request %d of session %d was already answered", cmd.Request, cmd.Session))
		}
		if prev, ok := sess.lookup(cmd.Request); ok {
			// Stored in the state's codec; answered in version 1, which
			// the proposer's own build reads. Written by EncodeFor: cannot fail.
			res, _ := DecodeResult(prev)
			return Applied{Cmd: cmd, Result: res, Encoded: res.Encode()}
		}
		res, changes := s.apply(index, &cmd)
		s.uncache(changes)
		enc := res.Encode()
		stored := enc // the state's bytes: in the cell's codec (codecgate.go)
		if s.codec == LogCodecJSON {
			stored = res.EncodeFor(s.codec)
		}
		// The op may have ended the session (close); only a live one
		// records. A refusal because the prefix is not served here (moved,
		// not yet, never) is not recorded: it applied nothing, and a retry
		// of the same request once the prefix is served must apply.
		if _, live := s.sessions[cmd.Session]; live && !routingRefusal(res.Err) {
			sess.record(cmd.Request, stored)
		}
		return Applied{Cmd: cmd, Result: res, Encoded: enc, Changes: changes}
	}
	res, changes := s.apply(index, &cmd)
	s.uncache(changes)
	return Applied{Cmd: cmd, Result: res, Encoded: res.Encode(), Changes: changes}
}

func refused(index uint64, cmd Command, err *api.Error) Applied {
	res := Result{Err: err, Index: index}
	return Applied{Cmd: cmd, Result: res, Encoded: res.Encode()}
}

func isDedupedOp(op Op) bool {
	switch op {
	case OpTxn:
		return true
	case OpCreate, OpPut, OpDelete, OpSetLockMode:
		return true
	}
	return false
}

func (s *State) apply(index uint64, c *Command) (Result, []Change) {
	var (
		res     Result
		changes []Change
	)
	switch c.Op {
	case OpOpenSession:
		res = s.openSession(index, c)
	case OpCloseSession:
		res, changes = s.closeSession(index, c)
	case OpExpireSession:
		res, changes = s.expireSession(index, c)
	case OpCreate:
		res, changes = s.create(index, c)
	case OpPut:
		res, changes = s.put(index, c)
	case OpDelete:
		res, changes = s.delete(index, c)
	case OpLeaderStart:
		res, changes = s.leaderStart(index, c)
	case OpLeaderTick:
		res = s.leaderTick(c)
	case OpConfirm:
		res = s.confirm(c)
	case OpCacheSession:
		res = s.cacheSession(c)
	case OpEnsurePrefix:
		res, changes = s.ensurePrefix(index, c)
	case OpSealPrefix:
		res, changes = s.sealPrefix(index, c)
	case OpUnsealPrefix:
		res, changes = s.unsealPrefix(index, c)
	case OpStagePrefix:
		res, changes = s.stagePrefix(index, c)
	case OpDropPrefix:
		res, changes = s.dropPrefix(index, c)
	case OpEndLockDelay:
		res, changes = s.endLockDelay(index, c)
	case OpSetCodec:
		res = s.setCodec(c)
	case OpTxn:
		res, changes = s.txn(index, c) // txn.go
	case OpSetLockMode:
		res, changes = s.setLockMode(index, c) // rwlock.go
	case OpHandOver:
		res = s.handOver(index, c) // handover.go
	default:
		res = Result{Err: api.Errorf(api.CodeBadRequest, "unknown op %q", c.Op)}
	}
	res.Index = index
	return res, changes
}

// --- sessions ---
