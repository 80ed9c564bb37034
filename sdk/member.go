package sdk

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/lockservice/lockd/api"
)

// Member is this process's membership of a group: an ephemeral sequential
// node under the group holding the member's value, gone when it leaves or
// its session ends.
type Member struct {
	s    *Session
	node string

	mu   sync.Mutex
	left bool
}

// MemberInfo is one live member of a group.
type MemberInfo struct {
	Node  string
	Value []byte
}

// memberPrefix is the name prefix of membership nodes; the cell
// appends the 10-digit sequence number, so name order is join order.
const memberPrefix = "m-"

// Join adds this process to group (created if missing) with value: an
// ephemeral sequential node owned by the cell's session. If ctx ends
// before the create's reply, the create is resent with its request id
// and the node it made deleted, so no ghost member is left behind.
func (c *Client) Join(ctx context.Context, group string, value []byte) (*Member, error) {
	cs, err := c.cellForPath(group)
	if err != nil {
		return nil, err
	}
	if err := checkValue(value); err != nil {
		return nil, err
	}
	s, err := c.session(ctx, cs)
	if err != nil {
		return nil, err
	}
	id, err := s.reqs.begin(ctx)
	if err != nil {
		return nil, err
	}
	req := &api.CreateRequest{Path: api.Join(group, memberPrefix), Value: value, Ephemeral: true, Sequential: true, MakeParents: true}
	var resp api.CreateResponse
	err = s.writeID(ctx, id, &req.WriteHeader, api.RouteCreate, req, &resp)
	if unknownOutcome(err) {
		s.cleanup(ctx, cleanupTask{id: id, create: req})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	s.reqs.end(id)
	if err != nil {
		return nil, err
	}
	return &Member{s: s, node: resp.Node.Path}, nil
}

// Node is the member's node.
func (m *Member) Node() string { return m.node }

// Leave removes the member from its group. It is nil if the node is
// already gone (its session ended); a second Leave returns an error
// matching ErrNotHeld. If the delete's outcome is unknown it goes on in
// the background while the session lives, and the error is returned.
func (m *Member) Leave(ctx context.Context) error {
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return recipeErr(codeNotHeld, nil, "member %s has left", m.node)
	}
	m.left = true
	m.mu.Unlock()
	req := api.DeleteRequest{Path: m.node}
	var resp api.WriteResponse
	err := m.s.write(ctx, &req.WriteHeader, api.RouteDelete, &req, &resp)
	switch {
	case err == nil || api.CodeOf(err) == api.CodeNoNode || sessionGone(err):
		return nil
	case unknownOutcome(err):
		m.s.deferCleanup(cleanupTask{path: m.node})
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

// maxMemberReads bounds concurrent value reads in Members.
const maxMemberReads = 16

// Members returns the live members of group, in join order (empty if the
// group does not exist).
func (c *Client) Members(ctx context.Context, group string) ([]MemberInfo, error) {
	names, _, err := c.Children(ctx, group)
	if errors.Is(err, ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c.memberValues(ctx, group, names)
}

// memberValues reads the values of the member nodes among names.
func (c *Client) memberValues(ctx context.Context, group string, names []string) ([]MemberInfo, error) {
	names = sortBySeq(names, memberPrefix)
	out := make([]MemberInfo, len(names))
	keep := make([]bool, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, maxMemberReads)
	var wg sync.WaitGroup
	for i, name := range names {
		node := api.Join(group, name)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			n, err := c.Get(ctx, node)
			switch {
			case err == nil:
				out[i], keep[i] = MemberInfo{Node: node, Value: n.Value}, true
			case !errors.Is(err, ErrNoNode): // one that left meanwhile is simply not listed
				errs[i] = err
			}
		})
	}
	wg.Wait()
	res := make([]MemberInfo, 0, len(out))
	for i := range out {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if keep[i] {
			res = append(res, out[i])
		}
	}
	return res, nil
}

// WatchMembers delivers the live set of group (in join order; empty while
// the group does not exist), then the set after each change, until ctx
// ends or the client closes; then the channel is closed. One children
// watch on the group is armed at a time. Errors are retried with backoff;
// a slow reader sees the latest set, not every intermediate one.
func (c *Client) WatchMembers(ctx context.Context, group string) <-chan []MemberInfo {
	out := make(chan []MemberInfo, 1)
	go func() {
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(c.ctx, cancel)
		defer stop()
		var last []MemberInfo
		first := true
		for attempt := 0; ctx.Err() == nil; {
			names, _, ch, err := c.ChildrenW(ctx, group)
			if errors.Is(err, ErrNoNode) {
				// Wait for the group to be created. If it was created
				// meanwhile, read its children again at once.
				var exists bool
				_, exists, ch, err = c.GetW(ctx, group)
				if err == nil && exists {
					continue
				}
				names = nil
			}
			if err != nil {
				sleepCtx(ctx, backoff(attempt))
				attempt++
				continue
			}
			ms, err := c.memberValues(ctx, group, names)
			if err != nil {
				sleepCtx(ctx, backoff(attempt))
				attempt++
				continue
			}
			attempt = 0
			if first || !sameMembers(last, ms) {
				select {
				case out <- ms:
				case <-ctx.Done():
					return
				}
				first, last = false, ms
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func sameMembers(a, b []MemberInfo) bool {
	return slices.EqualFunc(a, b, func(x, y MemberInfo) bool {
		return x.Node == y.Node && string(x.Value) == string(y.Value)
	})
}

// CompareAndSet writes value to the persistent node at path only if the
// node is at expectedVersion; expectedVersion 0 means it must not exist
// yet (it is then created). It fails with version_mismatch (or
// node_exists, no_node) otherwise, changing nothing. It returns the node
// as written.
func (c *Client) CompareAndSet(ctx context.Context, path string, value []byte, expectedVersion uint64) (api.Node, error) {
	return c.Put(ctx, path, value, WithVersion(expectedVersion))
}
