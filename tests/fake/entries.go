package fake

// The state machine: every write is an entry encoded as the real cell
// encodes it (server/cell: operations.go, sessions.go) and applied to a
// real fsm.State at the next index; what the fake adds after an apply is
// the leader's soft state (server/cell/apply.go): its watch table and
// its sessions' queued events.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// proposeLocked applies cmd as the cell's next log entry and returns the
// result as a proposer decodes it. With auth off every caller is an
// admin (server/httpapi's principal), so the entry says so.
func (c *Cell) proposeLocked(cmd *fsm.Command) fsm.Result {
	cmd.Admin = true
	a := c.st.ApplyEntry(c.st.Index()+1, cmd.Encode())
	c.afterApplyLocked(&a)
	res, err := fsm.DecodeResult(a.Encoded)
	if err != nil {
		res = fsm.Result{Err: api.Errorf(api.CodeInternal, "undecodable result: %v", err)}
	}
	return res
}

// afterApplyLocked is the leader's part after an entry applied, as the
// real cell's afterApply: fire the watches the changes trigger (a
// session's own delete consumes its own watches silently), reset the
// leader's soft state on a new leadership, track sessions opened and
// ended, and arm a lock node's watch in the same step as its create.
func (c *Cell) afterApplyLocked(a *fsm.Applied) {
	var by uint64
	if a.Cmd.Op == fsm.OpDelete {
		by = a.Cmd.Session
	}
	c.watches.Apply(a.Changes, by)
	for _, ch := range a.Changes {
		if d, ok := c.st.LockDelayOf(ch.Path); ok && ch.Type == fsm.ChangeLockDelay {
			c.timeLockDelay(ch.Path, d.Since, time.Duration(d.MS)*time.Millisecond)
		}
	}
	cmd, res := &a.Cmd, &a.Result
	switch cmd.Op {
	case fsm.OpLeaderStart:
		if res.Err == nil {
			c.watches.Reset()
			for _, s := range c.sessions {
				s.pending = nil
			}
		}
	case fsm.OpOpenSession:
		if res.Err == nil && res.Session == res.Index {
			c.sessions[res.Session] = &session{leaseMS: res.LeaseMS}
		}
	case fsm.OpCloseSession, fsm.OpExpireSession:
		id := cmd.Session
		if cmd.Op == fsm.OpExpireSession {
			id = cmd.Target
		}
		if c.st.SessionExists(id) != nil {
			delete(c.sessions, id)
			c.watches.DropSession(id)
		}
	case fsm.OpCreate:
		if res.Err == nil && cmd.Lock != api.LockNone && res.Node != nil {
			c.armLockLocked(cmd.Session, res.Node.Path, res.WaitFor)
		}
	}
	c.broadcastLocked()
}

// armLockLocked arms a new lock node's watch: a waiter's on what it waits
// for (its predecessor, or its directory in lock-delay), a holder's on its
// own node; one that is gone already (a create answered from the dedupe
// window) fires at once.
func (c *Cell) armLockLocked(session uint64, node, waitFor string) {
	watched := node
	if waitFor != "" {
		watched = waitFor
		if _, delayed := c.st.LockDelayOf(waitFor); delayed {
			c.watches.Register(session, "", waitFor, api.WatchData)
			return
		}
	}
	if exists, _, _, _ := c.st.LockState(watched); exists {
		c.watches.Register(session, "", watched, api.WatchData)
		return
	}
	c.watches.FireNow(session, api.Event{Type: api.EventDeleted, Path: watched, Kind: api.WatchData, Index: c.st.Index()})
}

// timeLockDelay ends dir's lock-delay that began at index since once it
// has run, as the real leader does: an end_lock_delay entry (one naming
// a delay a later release restarted changes nothing).
func (c *Cell) timeLockDelay(dir string, since uint64, d time.Duration) {
	time.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-c.closed:
		default:
			c.proposeLocked(&fsm.Command{Op: fsm.OpEndLockDelay, Path: dir, Since: since})
		}
	})
}

// refuse answers a refused command or read with its code's HTTP status.
func refuse(e *api.Error) (int, any) { return e.Code.HTTPStatus(), e }

// openSessionLocked opens a session as the real cell's OpenSession: the
// cell's default lease for none asked, and its timing's keepalive and
// grace in the reply (0, omitted, without a timing).
func (c *Cell) openSessionLocked(req api.OpenSessionRequest) (int, any) {
	var t api.CellTiming
	if c.timing != nil {
		t = *c.timing
	}
	lease := req.LeaseMS
	if lease <= 0 {
		lease = api.DefaultLease.Milliseconds()
		if t.LeaseMS > 0 {
			lease = t.LeaseMS
		}
	}
	res := c.proposeLocked(&fsm.Command{Op: fsm.OpOpenSession, LeaseMS: lease, Nonce: req.Nonce, WriteHeader: api.WriteHeader{Secret: newSecret()}})
	if res.Err != nil {
		return refuse(res.Err)
	}
	return 200, api.SessionResponse{Session: res.Session, Secret: res.Secret, LeaseMS: res.LeaseMS, Epoch: res.Epoch, Index: res.Index,
		KeepAliveMS: t.KeepAliveMS, GraceMS: t.GraceMS}
}

func (c *Cell) closeSessionLocked(req api.CloseSessionRequest) (int, any) {
	res := c.proposeLocked(&fsm.Command{Op: fsm.OpCloseSession, WriteHeader: api.WriteHeader{Session: req.Session, Secret: req.Secret},
		AtMS: time.Now().UnixMilli()})
	if res.Err != nil {
		return refuse(res.Err)
	}
	return 200, struct{}{}
}

func (c *Cell) createLocked(req api.CreateRequest) (int, any) {
	res := c.proposeLocked(&fsm.Command{Op: fsm.OpCreate, WriteHeader: req.WriteHeader, Path: req.Path, Value: req.Value,
		Ephemeral: req.Ephemeral, Sequential: req.Sequential, Lock: req.Lock, MakeParents: req.MakeParents, LockDelayMS: req.LockDelayMS,
		Permits: int64(req.Permits)})
	if res.Err != nil {
		return refuse(res.Err)
	}
	return 200, api.CreateResponse{Node: *res.Node, Index: res.Index, Token: res.Token, WaitFor: res.WaitFor}
}

func (c *Cell) putLocked(req api.PutRequest) (int, any) {
	res := c.proposeLocked(&fsm.Command{Op: fsm.OpPut, WriteHeader: req.WriteHeader, Path: req.Path, Value: req.Value,
		Version: req.Version, MakeParents: req.MakeParents})
	if res.Err != nil {
		return refuse(res.Err)
	}
	return 200, api.WriteResponse{Node: *res.Node, Index: res.Index}
}

func (c *Cell) deleteLocked(req api.DeleteRequest) (int, any) {
	res := c.proposeLocked(&fsm.Command{Op: fsm.OpDelete, WriteHeader: req.WriteHeader, Path: req.Path, Version: req.Version})
	if res.Err != nil {
		return refuse(res.Err)
	}
	return 200, api.WriteResponse{Node: *res.Node, Index: res.Index}
}

// Expire ends a session as its lease running out would: the leader's
// expire_session entry under the current leader epoch (its ephemeral
// nodes go; later requests naming it get session_expired). When a lease
// runs out is the test's to decide: the fake times no lease.
func (c *Cell) Expire(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.proposeLocked(&fsm.Command{Op: fsm.OpExpireSession, Target: id, Epoch: c.st.Epoch(), AtMS: time.Now().UnixMilli()})
}

// DeleteQuietly deletes the node at path (a delete entry, as an admin's
// without a session) and, in the same step, drops every session's pending
// events, so no client hears of it. A delete the state machine refuses
// (no such node, children) changes nothing but the dropped events.
func (c *Cell) DeleteQuietly(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.proposeLocked(&fsm.Command{Op: fsm.OpDelete, Path: path})
	for _, s := range c.sessions {
		s.pending = nil
	}
}

// newSecret draws a session secret as the real cell does: 128 random
// bits, hex, drawn by the proposer and carried in the entry.
func newSecret() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("fake: no randomness for a session secret: %v", err))
	}
	return hex.EncodeToString(b[:])
}
