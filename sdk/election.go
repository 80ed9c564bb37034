package sdk

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/lockservice/lockd/api"
)

// LeaderInfo is an election's current leader: the value it campaigned or
// proclaimed with, its node, and its fencing token.
type LeaderInfo struct {
	Value []byte
	Node  string
	Token uint64
}

// Election is leader election at a path, the lock recipe with the
// candidate's value in its node: the lowest candidate leads. Campaign
// blocks until this candidate leads; Context says while it may act as
// leader.
type Election struct {
	c    *Client
	path string

	mu sync.Mutex
	m  *Mutex
}

// NewElection returns the election at path.
func (c *Client) NewElection(path string) *Election {
	return &Election{c: c, path: path}
}

// Campaign blocks until this candidate leads, with value in its node, or
// ctx ends (its candidacy is then withdrawn).
func (e *Election) Campaign(ctx context.Context, value []byte) error {
	m := e.c.NewMutex(e.path, lockValue(value))
	e.mu.Lock()
	if e.m != nil && e.m.Held() {
		e.mu.Unlock()
		return api.Errorf(api.CodeBadRequest, "already leading %s", e.path)
	}
	e.m = m
	e.mu.Unlock()
	return m.Lock(ctx)
}

func (e *Election) mutex() *Mutex {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m
}

// Context is live while this candidate leads and its lease is certain.
// Jeopardy means "not leader" at once; leadership is regained only after
// the session is confirmed safe (the node still holds: it is re-checked by
// its deletion watch), when a fresh call returns a live context again.
func (e *Election) Context() context.Context {
	if m := e.mutex(); m != nil {
		return m.Context()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// Token is the leader's fencing token, 0 if not leading.
func (e *Election) Token() uint64 {
	if m := e.mutex(); m != nil {
		return m.Token()
	}
	return 0
}

// Resign gives up leadership (or a candidacy in progress is ended by its
// Campaign's context). ErrNotHeld if not leading.
func (e *Election) Resign(ctx context.Context) error {
	m := e.mutex()
	if m == nil {
		return ErrNotHeld
	}
	return m.Unlock(ctx)
}

// Proclaim changes the leader's value without giving up leadership.
func (e *Election) Proclaim(ctx context.Context, value []byte) error {
	m := e.mutex()
	if m == nil || !m.Held() {
		return ErrNotHeld
	}
	_, err := e.c.Put(ctx, m.Node(), value)
	return err
}

// Leader returns the current leader: the lowest candidate. ErrNoLeader if
// there is none.
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	for attempt := 0; attempt < 10; attempt++ {
		names, _, err := e.c.Children(ctx, e.path)
		if errors.Is(err, ErrNoNode) {
			return LeaderInfo{}, ErrNoLeader
		}
		if err != nil {
			return LeaderInfo{}, err
		}
		lowest := lowestCandidate(names)
		if lowest == "" {
			return LeaderInfo{}, ErrNoLeader
		}
		node := api.Join(e.path, lowest)
		n, err := e.c.Get(ctx, node)
		if errors.Is(err, ErrNoNode) {
			continue // it resigned between the two reads: look again
		}
		if err != nil {
			return LeaderInfo{}, err
		}
		return LeaderInfo{Value: n.Value, Node: node, Token: api.MakeToken(e.epoch(), n.CreateIndex)}, nil
	}
	return LeaderInfo{}, api.Errorf(api.CodeUnavailable, "leadership of %s kept changing", e.path)
}

func (e *Election) epoch() uint64 {
	for _, c := range e.c.Directory().Cells {
		for _, p := range c.Prefixes {
			if p == api.Prefix(e.path) {
				return c.Epoch
			}
		}
	}
	return 1
}

// lowestCandidate is the first election node in sequence order.
func lowestCandidate(names []string) string {
	var cands []string
	for _, n := range names {
		if strings.HasPrefix(n, LockNodePrefix) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Strings(cands) // one prefix, zero-padded: name order is sequence order
	return cands[0]
}

// Observe delivers the current leader, then every change (a zero
// LeaderInfo while nobody leads), until ctx ends; then the channel is
// closed. It watches only the leader's node (or, while nobody leads, the
// election's children): one event per change.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	out := make(chan LeaderInfo, 1)
	e.c.bg.Add(1)
	go func() {
		defer e.c.bg.Done()
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-e.c.ctx.Done():
				cancel()
			case <-ctx.Done():
			}
		}()
		var last *LeaderInfo
		for attempt := 0; ctx.Err() == nil; attempt++ {
			cur, ch, err := e.observeOnce(ctx)
			if err != nil {
				sleepCtx(ctx, backoff(attempt))
				continue
			}
			attempt = 0
			if ch == nil {
				continue
			}
			if last == nil || last.Node != cur.Node || string(last.Value) != string(cur.Value) {
				select {
				case out <- cur:
				case <-ctx.Done():
					return
				}
				c := cur
				last = &c
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

// observeOnce reads the leader and arms one watch that fires when it
// changes: the leader's node while someone leads, the election's children
// while nobody does. A nil channel means "read again now".
func (e *Election) observeOnce(ctx context.Context) (LeaderInfo, <-chan api.Event, error) {
	names, _, err := e.c.Children(ctx, e.path)
	if errors.Is(err, ErrNoNode) {
		_, exists, ch, err := e.c.GetW(ctx, e.path) // fires on its creation
		if exists {
			ch = nil
		}
		return LeaderInfo{}, ch, err
	}
	if err != nil {
		return LeaderInfo{}, nil, err
	}
	lowest := lowestCandidate(names)
	if lowest == "" {
		names, _, ch, err := e.c.ChildrenW(ctx, e.path)
		if err != nil || lowestCandidate(names) != "" {
			return LeaderInfo{}, nil, err
		}
		return LeaderInfo{}, ch, nil
	}
	node := api.Join(e.path, lowest)
	n, exists, ch, err := e.c.GetW(ctx, node)
	if err != nil || !exists {
		return LeaderInfo{}, nil, err
	}
	return LeaderInfo{Value: n.Value, Node: node, Token: api.MakeToken(e.epoch(), n.CreateIndex)}, ch, nil
}

// Member is this process's membership of a group: an ephemeral sequential
// node holding its value, gone when it leaves or its session ends.
type Member struct {
	c    *Client
	node string
}

// MemberInfo is one live member.
type MemberInfo struct {
	Node  string
	Value []byte
}

// memberPrefix names membership nodes.
const memberPrefix = "m-"

// Join adds this process to group with value.
func (c *Client) Join(ctx context.Context, group string, value []byte) (*Member, error) {
	resp, err := c.Create(ctx, api.Join(group, memberPrefix), value, Ephemeral(), Sequential(), MakeParents())
	if err != nil {
		return nil, err
	}
	return &Member{c: c, node: resp.Node.Path}, nil
}

// Node is the member's node.
func (m *Member) Node() string { return m.node }

// Leave removes the member from its group.
func (m *Member) Leave(ctx context.Context) error {
	err := m.c.Delete(ctx, m.node)
	if errors.Is(err, ErrNoNode) || sessionGone(err) {
		return nil
	}
	return err
}

// maxMemberReads bounds concurrent value reads in Members.
const maxMemberReads = 16

// Members returns the live members of group, in join order.
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

func (c *Client) memberValues(ctx context.Context, group string, names []string) ([]MemberInfo, error) {
	var nodes []string
	for _, n := range names {
		if strings.HasPrefix(n, memberPrefix) {
			nodes = append(nodes, api.Join(group, n))
		}
	}
	out := make([]MemberInfo, len(nodes))
	keep := make([]bool, len(nodes))
	errs := make([]error, len(nodes))
	sem := make(chan struct{}, maxMemberReads)
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, node string) {
			defer wg.Done()
			defer func() { <-sem }()
			n, err := c.Get(ctx, node)
			switch {
			case err == nil:
				out[i], keep[i] = MemberInfo{Node: node, Value: n.Value}, true
			case !errors.Is(err, ErrNoNode): // one that left meanwhile is simply not listed
				errs[i] = err
			}
		}(i, node)
	}
	wg.Wait()
	res := out[:0]
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

// WatchMembers delivers the live set of group, then the set after each
// change, until ctx ends; then the channel is closed.
func (c *Client) WatchMembers(ctx context.Context, group string) <-chan []MemberInfo {
	out := make(chan []MemberInfo, 1)
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-c.ctx.Done():
				cancel()
			case <-ctx.Done():
			}
		}()
		for attempt := 0; ctx.Err() == nil; attempt++ {
			names, _, ch, err := c.ChildrenW(ctx, group)
			if errors.Is(err, ErrNoNode) {
				names, err = nil, nil
				_, _, ch, err = c.GetW(ctx, group)
			}
			if err != nil {
				sleepCtx(ctx, backoff(attempt))
				continue
			}
			ms, err := c.memberValues(ctx, group, names)
			if err != nil {
				sleepCtx(ctx, backoff(attempt))
				continue
			}
			attempt = 0
			select {
			case out <- ms:
			case <-ctx.Done():
				return
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

// CompareAndSet writes value to path only if the node is at
// expectedVersion (0: it must not exist yet); else version_mismatch (or
// node_exists, no_node).
func (c *Client) CompareAndSet(ctx context.Context, path string, value []byte, expectedVersion uint64) (api.Node, error) {
	return c.Put(ctx, path, value, WithVersion(expectedVersion))
}
