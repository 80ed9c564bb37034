package cell

import (
	"context"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// Create creates a node.
func (c *Cell) Create(ctx context.Context, req api.CreateRequest, who Caller) (api.CreateResponse, error) {
	if err := c.permitGate(&req); err != nil {
		return api.CreateResponse{}, err
	}
	if err := c.rwCreateGate(&req); err != nil { // rwlock.go
		return api.CreateResponse{}, err
	}
	done, err := c.beforeCreate(ctx, req.Path, req.MakeParents)
	if err != nil {
		return api.CreateResponse{}, err
	}
	res, err := c.propose(ctx, who.stamp(&fsm.Command{
		Op: fsm.OpCreate, WriteHeader: req.WriteHeader, Path: req.Path, Value: req.Value,
		Ephemeral: req.Ephemeral, Sequential: req.Sequential, Lock: req.Lock, MakeParents: req.MakeParents, LockDelayMS: req.LockDelayMS,
		Permits: int64(req.Permits), Container: req.Container,
	}))
	done(err)
	if err != nil {
		return api.CreateResponse{}, err
	}
	return api.CreateResponse{Node: *res.Node, Index: res.Index, Token: res.Token, WaitFor: res.WaitFor}, nil
}

// Put writes a value, once no client can serve the old one from its cache.
func (c *Cell) Put(ctx context.Context, req api.PutRequest, who Caller) (api.WriteResponse, error) {
	need, what := fsm.PutCodec(&req)
	if err := fsm.NeedCodec(c.LogCodec(), need, what); err != nil {
		return api.WriteResponse{}, err
	}
	done, err := c.beforeCreate(ctx, req.Path, req.MakeParents, req.Path)
	if err != nil {
		return api.WriteResponse{}, err
	}
	res, err := c.propose(ctx, who.stamp(&fsm.Command{
		Op: fsm.OpPut, WriteHeader: req.WriteHeader, Path: req.Path, Value: req.Value,
		Version: req.Version, MakeParents: req.MakeParents, Container: req.Container, Uncontain: req.Uncontain,
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
	q := getQuery{path: req.Path, session: req.Session, secret: req.Secret, watch: req.Watch}
	resp, err := read(ctx, c, func(s *fsm.State) (api.GetResponse, error) { return c.lookupGet(s, q) })
	if err != nil {
		return api.GetResponse{}, err
	}
	if epoch != 0 && resp.Exists && cacheableNode(resp.Node) {
		resp.Cacheable, resp.Epoch = true, epoch
	}
	return resp, nil
}

// Children is a linearizable list of a node's children.
func (c *Cell) Children(ctx context.Context, req api.ReadRequest) (api.ChildrenResponse, error) {
	q := childrenQuery{path: req.Path, session: req.Session, secret: req.Secret, watch: req.Watch != ""}
	return read(ctx, c, func(s *fsm.State) (api.ChildrenResponse, error) { return c.lookupChildren(s, q) })
}

// LockState re-checks a lock node.
func (c *Cell) LockState(ctx context.Context, req api.LockStateRequest) (api.LockStateResponse, error) {
	q := lockStateQuery{path: req.Path, session: req.Session, secret: req.Secret, watch: req.Watch}
	return read(ctx, c, func(s *fsm.State) (api.LockStateResponse, error) { return c.lookupLockState(s, q) })
}

// LockQueue is a lock's holders and waiters, linearizable.
func (c *Cell) LockQueue(ctx context.Context, path string) (api.LockQueueResponse, error) {
	return read(ctx, c, lockQueueQuery{path: path}.run)
}

// CheckLock answers whether token holds the lock at path now,
// linearizable: SyncRead is a ReadIndex round on the leader.
func (c *Cell) CheckLock(ctx context.Context, req api.LockCheckRequest) (api.LockCheckResponse, error) {
	return read(ctx, c, lockCheckQuery{path: req.Path, token: req.Token}.run)
}

// Watch re-arms watches with the last index the client saw.
func (c *Cell) Watch(ctx context.Context, req api.WatchRequest) (api.WatchResponse, error) {
	q := watchQuery{session: req.Session, secret: req.Secret, specs: req.Watches}
	return read(ctx, c, func(s *fsm.State) (api.WatchResponse, error) { return c.lookupWatch(s, q) })
}
