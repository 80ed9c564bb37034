package sdk

import (
	"context"
	"strings"
	"time"

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
	if mode == api.LockPermit {
		return PermitNodePrefix // semaphore.go
	}
	if mode == api.LockUpgradable {
		return UpgradableLockNodePrefix // rwlock.go
	}
	return LockNodePrefix
}

// lockCreateRequest is the create of a lock node in mode under parent.
func lockCreateRequest(parent string, mode api.LockMode, value []byte) (*api.CreateRequest, error) {
	if mode == api.LockNone || !mode.Valid() {
		return nil, api.Errorf(api.CodeBadRequest, "invalid lock mode %q", mode)
	}
	if err := checkValue(value); err != nil {
		return nil, err
	}
	return &api.CreateRequest{
		Path:        api.Join(parent, lockNodePrefix(mode)),
		Value:       value,
		Ephemeral:   true,
		Sequential:  true,
		Lock:        mode,
		MakeParents: true,
		Container:   true, // the directory goes with its last lock node (fsm/container.go)
	}, nil
}

// checkLockDelay refuses a lock-delay the cell would refuse.
func checkLockDelay(d time.Duration) error {
	if d < 0 || d > api.MaxLockDelay || d%time.Millisecond != 0 {
		return api.Errorf(api.CodeBadRequest, "lock-delay %v is outside 0 to %v (whole milliseconds)", d, api.MaxLockDelay)
	}
	return nil
}

// CreateLockNode is the first step of the lock recipe: it creates an
// ephemeral, sequential lock node under parent (creating parent if
// missing), owned by the cell's session, named LockNodePrefix+<seq> for
// an exclusive node and SharedLockNodePrefix+<seq> for a shared one. The
// reply's WaitFor is empty if the node holds the lock (Token is then the
// fencing token); else it names the sibling the node waits for, on which
// the cell arms a deletion (data) watch in the same apply: its channel is
// returned, and behaves as GetW's. When the node holds the lock the watch
// is on the node itself (its deletion by anyone else means the lock is
// lost), so holding costs no further call.
func (c *Client) CreateLockNode(ctx context.Context, parent string, mode api.LockMode, value []byte) (resp api.CreateResponse, ch <-chan api.Event, err error) {
	if _, err := lockCreateRequest(parent, mode, value); err != nil {
		return api.CreateResponse{}, nil, err
	}
	err = c.routed(ctx, parent, func(cs *cellState) error {
		req, _ := lockCreateRequest(parent, mode, value)
		s, err := c.session(ctx, cs)
		if err != nil {
			return err
		}
		id, err := s.reqs.begin(ctx)
		if err != nil {
			return err
		}
		defer s.reqs.end(id)
		resp, ch, err = s.createLockNode(ctx, id, req)
		return err
	})
	return resp, ch, err
}

// beginArming starts a write that arms a watch in the same apply: the
// session's generation it is sent under, or the session's error.
func (s *Session) beginArming() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	s.w.beginRead()
	return s.gen, nil
}

// createLockNode sends a lock node's create on this session under request
// id (the caller ends it), registering the predecessor watch the cell arms
// with it so that an event racing ahead of the reply is kept.
func (s *Session) createLockNode(ctx context.Context, id uint64, req *api.CreateRequest) (api.CreateResponse, <-chan api.Event, error) {
	var resp api.CreateResponse
	gen, err := s.beginArming()
	if err != nil {
		return resp, nil, err
	}
	err = s.writeID(ctx, id, &req.WriteHeader, api.RouteCreate, req, &resp)
	if api.CodeOf(err) == api.CodeCodecTooOld && req.Container {
		// A cluster not all upgraded yet: the directory stays (refused
		// before any proposal, so the id is resent for the same create).
		req.Container = false
		err = s.writeID(ctx, id, &req.WriteHeader, api.RouteCreate, req, &resp)
	}
	// The cell armed, in the create's own apply, the deletion watch on the
	// predecessor (if it must wait) or on the node itself (if it holds).
	ch := s.finishArming(err, func() (watchKey, uint64, bool) {
		if resp.WaitFor == "" {
			return watchKey{resp.Node.Path, api.WatchData}, resp.Index, true
		}
		return watchKey{WaitForPath(resp.Node.Path, resp.WaitFor), api.WatchData}, resp.Index, true
	}, gen)
	return resp, ch, err
}

// LockState re-checks the lock node at path (after a wake-up): whether it
// still exists, whether it holds the lock, and which sibling it waits for.
// With watch, a deletion watch is armed in the same call and its channel
// returned: on that sibling while the node waits, on the node itself while
// it holds (nil when it is gone); it behaves as GetW's.
func (c *Client) LockState(ctx context.Context, path string, watch bool) (api.LockStateResponse, <-chan api.Event, error) {
	var resp api.LockStateResponse
	var ch <-chan api.Event
	err := c.routed(ctx, path, func(cs *cellState) (err error) {
		ch, err = c.watchRead(ctx, cs, api.RouteLockState,
			func(sid uint64, secret string) any {
				return api.LockStateRequest{Path: path, Session: sid, Secret: secret, Watch: watch}
			},
			&resp, lockStateArmed(path, watch, &resp))
		return err
	})
	return resp, ch, err
}

// lockState is LockState on this session.
func (s *Session) lockState(ctx context.Context, path string, watch bool) (api.LockStateResponse, <-chan api.Event, error) {
	var resp api.LockStateResponse
	ch, err := s.armRead(ctx, api.RouteLockState, api.LockStateRequest{Path: path, Session: s.id, Secret: s.secret, Watch: watch},
		&resp, lockStateArmed(path, watch, &resp))
	return resp, ch, err
}

// lockStateNoSession reads a lock node's state without a session (and so
// without a watch).
func (c *Client) lockStateNoSession(ctx context.Context, path string) (api.LockStateResponse, error) {
	var resp api.LockStateResponse
	err := c.routed(ctx, path, func(cs *cellState) error {
		return c.do(ctx, cs, &call{route: api.RouteLockState, req: api.LockStateRequest{Path: path}, resp: &resp, retryUnsure: true})
	})
	return resp, err
}

func lockStateArmed(path string, watch bool, resp *api.LockStateResponse) func() (watchKey, uint64, bool) {
	return func() (watchKey, uint64, bool) {
		switch {
		case !watch || !resp.Exists:
			return watchKey{}, 0, false
		case resp.Held:
			return watchKey{path, api.WatchData}, resp.Index, true
		case resp.WaitFor == "":
			return watchKey{}, 0, false
		}
		return watchKey{WaitForPath(path, resp.WaitFor), api.WatchData}, resp.Index, true
	}
}

// WaitForPath resolves a WaitFor from a create or lock-state reply on the
// lock node at path to a full path: it may name the sibling or give its path.
func WaitForPath(path, waitFor string) string {
	if waitFor == "" || strings.HasPrefix(waitFor, "/") {
		return waitFor
	}
	return api.Join(api.Parent(path), waitFor)
}

// CheckToken asks the cell whether token is held on the lock at path right
// now (Chubby's CheckSequencer): a linearizable read on the cell's leader.
// It is for resources that cannot keep a high-water mark of their own, and
// it has a window: the holder may lose the lock the moment after the
// answer, so a resource that can store the highest token it has seen and
// refuse lower ones (package fence) is the safer check.
func (c *Client) CheckToken(ctx context.Context, path string, token uint64) (api.LockCheckResponse, error) {
	if err := api.ValidatePath(path); err != nil {
		return api.LockCheckResponse{}, err
	}
	var resp api.LockCheckResponse
	err := c.routed(ctx, path, func(cs *cellState) error {
		return c.do(ctx, cs, &call{route: api.RouteLockCheck, req: api.LockCheckRequest{Path: path, Token: token}, resp: &resp, retryUnsure: true})
	})
	return resp, err
}

// TokenValid reports whether token holds the lock at path right now
// (CheckToken's answer); it makes a Client a fence.Checker.
func (c *Client) TokenValid(ctx context.Context, path string, token uint64) (bool, error) {
	r, err := c.CheckToken(ctx, path, token)
	return r.Valid, err
}

// LockQueue lists the lock at path: its holders (one exclusive, or the
// leading shared ones), then its waiters in order, and its lock-delay if
// it is in one. A linearizable read, for operators (lockctl queue).
func (c *Client) LockQueue(ctx context.Context, path string) (api.LockQueueResponse, error) {
	if err := api.ValidatePath(path); err != nil {
		return api.LockQueueResponse{}, err
	}
	var resp api.LockQueueResponse
	err := c.routed(ctx, path, func(cs *cellState) error {
		return c.do(ctx, cs, &call{route: api.RouteLockQueue, req: api.LockQueueRequest{Path: path}, resp: &resp, retryUnsure: true})
	})
	return resp, err
}
