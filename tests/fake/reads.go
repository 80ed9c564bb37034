package fake

// Reads, answered from the real state as the real cell's lookups answer
// them (server/cell: the secret, then whether the cell serves the path,
// then the state's answer), arming watches in the leader's watch table.

import (
	"github.com/lockservice/lockd/api"
)

// checkReadLocked refuses a read naming a session without its secret,
// or of a path whose prefix this cell does not serve now.
func (c *Cell) checkReadLocked(session uint64, secret, path string) *api.Error {
	if session != 0 {
		if err := c.st.CheckSecret(session, secret); err != nil {
			return err
		}
	}
	return c.st.CheckServes(path)
}

// canWatchLocked checks that session may arm more watches: it is live,
// and within MaxWatchesPerSession (more 0: a lock's own wait, exempt).
func (c *Cell) canWatchLocked(session uint64, more int) *api.Error {
	if session == 0 {
		return api.Errorf(api.CodeNoSession, "a watch needs a session")
	}
	if err := c.st.SessionExists(session); err != nil {
		return err
	}
	if armed := c.watches.Armed(session); more > 0 && armed+more > api.MaxWatchesPerSession {
		return api.Errorf(api.CodeLimitExceeded, "session %d has %d watches armed; %d more would pass the limit %d (MaxWatchesPerSession)", session, armed, more, api.MaxWatchesPerSession)
	}
	return nil
}

// getLocked: a data watch on a missing node is an exists-watch (exists
// false, fires on create); any other get of a missing node is no_node.
func (c *Cell) getLocked(req api.ReadRequest) (int, any) {
	if err := c.checkReadLocked(req.Session, req.Secret, req.Path); err != nil {
		return refuse(err)
	}
	n, ok := c.st.Get(req.Path)
	if !ok && req.Watch != api.WatchData {
		return refuse(api.Errorf(api.CodeNoNode, "%s does not exist", req.Path))
	}
	if req.Watch != "" {
		if err := c.canWatchLocked(req.Session, 1); err != nil {
			return refuse(err)
		}
		c.watches.Register(req.Session, "", req.Path, req.Watch)
	}
	return 200, api.GetResponse{Exists: ok, Node: n, Index: c.st.Index()}
}

func (c *Cell) childrenLocked(req api.ReadRequest) (int, any) {
	if err := c.checkReadLocked(req.Session, req.Secret, req.Path); err != nil {
		return refuse(err)
	}
	n, names, ok := c.st.Children(req.Path)
	if !ok {
		return refuse(api.Errorf(api.CodeNoNode, "%s does not exist", req.Path))
	}
	if req.Watch != "" {
		if err := c.canWatchLocked(req.Session, 1); err != nil {
			return refuse(err)
		}
		c.watches.Register(req.Session, "", req.Path, api.WatchChildren)
	}
	return 200, api.ChildrenResponse{Node: n, Children: names, Index: c.st.Index()}
}

// lockStateLocked: a waiter's watch goes on what it waits for, a
// holder's on its own node.
func (c *Cell) lockStateLocked(req api.LockStateRequest) (int, any) {
	if err := c.checkReadLocked(req.Session, req.Secret, req.Path); err != nil {
		return refuse(err)
	}
	exists, held, waitFor, token := c.st.LockState(req.Path)
	if req.Watch && exists {
		if err := c.canWatchLocked(req.Session, 0); err != nil {
			return refuse(err)
		}
		watched := waitFor
		if held {
			watched = req.Path
		}
		c.watches.Register(req.Session, "", watched, api.WatchData)
	}
	var version uint64
	if n, ok := c.st.Get(req.Path); ok && exists {
		version = n.Version
	}
	resp := api.LockStateResponse{Exists: exists, Held: held, WaitFor: waitFor, Token: token, Version: version, Index: c.st.Index()}
	if d, ok := c.st.LockDelayOf(waitFor); ok {
		resp.Delay = d.Info()
	}
	return 200, resp
}

// watchLocked re-arms watches: one whose node changed after the index the
// client saw fires at once (the state's WatchCheck decides).
func (c *Cell) watchLocked(req api.WatchRequest) (int, any) {
	if req.Session != 0 {
		if err := c.st.CheckSecret(req.Session, req.Secret); err != nil {
			return refuse(err)
		}
	}
	if err := c.canWatchLocked(req.Session, len(req.Watches)); err != nil {
		return refuse(err)
	}
	for _, w := range req.Watches {
		if err := c.st.CheckServes(w.Path); err != nil {
			return refuse(err)
		}
	}
	for _, w := range req.Watches {
		if typ, fire := c.st.WatchCheck(w.Path, w.Kind, w.Since); fire {
			c.watches.FireNow(req.Session, api.Event{Type: typ, Path: w.Path, Kind: w.Kind, Index: c.st.Index()})
		} else {
			c.watches.Register(req.Session, "", w.Path, w.Kind)
		}
	}
	c.broadcastLocked()
	return 200, api.WatchResponse{Index: c.st.Index()}
}

func (c *Cell) lockQueueLocked(req api.LockQueueRequest) (int, any) {
	if err := c.st.CheckServes(req.Path); err != nil {
		return refuse(err)
	}
	entries, more, err := c.st.LockQueue(req.Path, api.MaxLockQueue)
	if err != nil {
		return refuse(err)
	}
	resp := api.LockQueueResponse{Path: req.Path, Index: c.st.Index(), Entries: entries, More: more}
	if n, inUse, ok := c.st.SemaphoreOf(req.Path); ok {
		resp.Permits, resp.InUse = n, inUse
	}
	if d, ok := c.st.LockDelayOf(req.Path); ok {
		resp.Delay = d.Info()
	}
	return 200, resp
}

func (c *Cell) lockCheckLocked(req api.LockCheckRequest) (int, any) {
	if err := c.st.CheckServes(req.Path); err != nil {
		return refuse(err)
	}
	valid, holders := c.st.CheckToken(req.Path, req.Token)
	return 200, api.LockCheckResponse{Valid: valid, Holders: holders, Index: c.st.Index()}
}

// Children lists the names of path's children, sorted (nil for none).
func (c *Cell) Children(path string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, names, _ := c.st.Children(path)
	if len(names) == 0 {
		return nil
	}
	return names
}

// Node returns the node at path, with its value.
func (c *Cell) Node(path string) (api.Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.Get(path)
}
