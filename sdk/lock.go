package sdk

import (
	"context"
	"strings"

	"github.com/lockservice/lockd/api"
)

// LockNodePrefix is the name prefix of exclusive lock waiter nodes, and
// SharedLockNodePrefix of shared ones; the cell appends the 10-digit
// sequence number ("w-0000000057"). Order comes from the sequence number,
// shared by both.
const (
	LockNodePrefix       = "w-"
	SharedLockNodePrefix = "r-"
)

func lockNodePrefix(mode api.LockMode) string {
	if mode == api.LockShared {
		return SharedLockNodePrefix
	}
	return LockNodePrefix
}

// CreateLockNode is the first step of the lock recipe: it creates an
// ephemeral, sequential lock node LockNodePrefix+<seq> in mode under
// parent (creating parent if missing), owned by the cell's session. The
// reply's WaitFor is empty if the node holds the lock (Token is then the
// fencing token); else it names the sibling the node waits for, on which
// the cell arms a deletion (data) watch in the same apply: its channel is
// returned, and behaves as GetW's. The channel is nil when the node holds
// the lock.
func (c *Client) CreateLockNode(ctx context.Context, parent string, mode api.LockMode, value []byte) (api.CreateResponse, <-chan api.Event, error) {
	resp, ch, _, err := c.createLockNode(ctx, parent, mode, value)
	return resp, ch, err
}

// createLockNode is CreateLockNode that also returns the owning session.
func (c *Client) createLockNode(ctx context.Context, parent string, mode api.LockMode, value []byte) (api.CreateResponse, <-chan api.Event, *Session, error) {
	var resp api.CreateResponse
	if mode == api.LockNone || !mode.Valid() {
		return resp, nil, nil, api.Errorf(api.CodeBadRequest, "invalid lock mode %q", mode)
	}
	cs, err := c.cellForPath(parent)
	if err != nil {
		return resp, nil, nil, err
	}
	if err := checkValue(value); err != nil {
		return resp, nil, nil, err
	}
	req := api.CreateRequest{
		Path:        api.Join(parent, lockNodePrefix(mode)),
		Value:       value,
		Ephemeral:   true,
		Sequential:  true,
		Lock:        mode,
		MakeParents: true,
	}
	s, gen, err := c.beginArming(ctx, cs)
	if err != nil {
		return resp, nil, nil, err
	}
	err = s.write(ctx, &req.WriteHeader, api.RouteCreate, &req, &resp)
	ch := s.finishArming(err, func() (watchKey, uint64, bool) {
		if resp.WaitFor == "" {
			return watchKey{}, 0, false
		}
		return watchKey{WaitForPath(resp.Node.Path, resp.WaitFor), api.WatchData}, resp.Index, true
	}, gen)
	return resp, ch, s, err
}

// LockState re-checks the lock node at path (after a wake-up): whether it
// still exists, whether it holds the lock, and which sibling it waits for.
// With watch, a deletion watch is armed on that sibling in the same call
// and its channel returned (nil when the node holds the lock or is gone);
// it behaves as GetW's.
func (c *Client) LockState(ctx context.Context, path string, watch bool) (api.LockStateResponse, <-chan api.Event, error) {
	var resp api.LockStateResponse
	cs, err := c.cellForPath(path)
	if err != nil {
		return resp, nil, err
	}
	ch, err := c.watchRead(ctx, cs, api.RouteLockState,
		func(sid uint64) any { return api.LockStateRequest{Path: path, Session: sid, Watch: watch} },
		&resp,
		func() (watchKey, uint64, bool) {
			if !watch || !resp.Exists || resp.Held || resp.WaitFor == "" {
				return watchKey{}, 0, false
			}
			return watchKey{WaitForPath(path, resp.WaitFor), api.WatchData}, resp.Index, true
		})
	return resp, ch, err
}

// WaitForPath resolves a WaitFor from a create or lock-state reply on the
// lock node at path to a full path: it may name the sibling or give its path.
func WaitForPath(path, waitFor string) string {
	if waitFor == "" || strings.HasPrefix(waitFor, "/") {
		return waitFor
	}
	return api.Join(api.Parent(path), waitFor)
}
