package sdk

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/lockservice/lockd/api"
)

// LeaderInfo is an election's current leader: the value it campaigned or
// proclaimed with, its node, and its fencing token. The zero LeaderInfo
// means nobody leads.
type LeaderInfo struct {
	Value []byte
	Node  string
	Token uint64
}

// Election is leader election at a path: the lock recipe with exclusive
// nodes, the candidate's value in its node, and the lowest candidate
// leading. Campaign blocks until this candidate leads; Context says while
// it may act as leader. Its methods are safe for concurrent use.
type Election struct {
	c    *Client
	path string

	mu sync.Mutex
	m  *Mutex // the current (or last) candidacy
}

// NewElection returns the election at path. Nothing is sent until a call.
func (c *Client) NewElection(path string) *Election {
	return &Election{c: c, path: path}
}

// Campaign blocks until this candidate leads with value in its node and
// its lease is certain, or ctx ends (its candidacy is then withdrawn and
// ctx's error returned). If this Election already leads, Campaign returns
// once its leadership is certain again (after jeopardy: SessionSafe and
// the node re-checked), keeping its value (see Proclaim), or campaigns
// anew if the leadership was lost meanwhile. A Campaign already in
// progress makes another fail with ErrBadRequest.
func (e *Election) Campaign(ctx context.Context, value []byte) error {
	if m := e.mutex(); m != nil && m.Held() {
		err := m.waitLive(ctx)
		if err == nil || !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrNotHeld) {
			return err
		}
	}
	e.mu.Lock()
	if e.m != nil && e.m.busy() {
		e.mu.Unlock()
		return api.Errorf(api.CodeBadRequest, "a campaign for %s is already in progress", e.path)
	}
	m := e.c.NewMutex(e.path, lockValue(value))
	e.m = m
	e.mu.Unlock()
	return m.Lock(ctx)
}

// busy reports whether the Mutex holds its lock or is acquiring it. A
// grant whose session has ended is not held, though its monitor may not
// have marked it lost yet: a campaign after an expiry starts afresh.
func (m *Mutex) busy() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acquiring || (m.g != nil && m.g.activeLocked() && m.g.s.Err() == nil)
}

func (e *Election) mutex() *Mutex {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m
}

// Context is the leadership context, with Mutex.Context's rules: live
// while this candidate leads and its lease is certain; cancelled the
// moment the session enters jeopardy ("not leader" at once, pitfall 7),
// the leadership is lost, or Resign. Leadership is regained only after
// SessionSafe and the node re-checked with LockState; a fresh call then
// returns a live context again, with the same token.
func (e *Election) Context() context.Context {
	if m := e.mutex(); m != nil {
		return m.Context()
	}
	return cancelledCtx
}

// Token is the leader's fencing token, 0 if not leading.
func (e *Election) Token() uint64 {
	if m := e.mutex(); m != nil {
		return m.Token()
	}
	return 0
}

// Resign gives up leadership: Context is cancelled and the node deleted,
// which wakes the next candidate. It returns an error matching ErrNotHeld
// if not leading (one matching ErrLockLost too if the leadership was
// lost). A campaign still waiting is withdrawn by ending its context.
func (e *Election) Resign(ctx context.Context) error {
	m := e.mutex()
	if m == nil {
		return recipeErr(codeNotHeld, nil, "not leading %s", e.path)
	}
	return m.Unlock(ctx)
}

// Proclaim changes the leader's value without giving up leadership. It
// needs a live Context: an error matching ErrNotHeld if not leading or in
// jeopardy, ErrLockLost if the node turns out to be gone. The write is
// conditional on the node's version, so a node that is gone is never
// re-created.
func (e *Election) Proclaim(ctx context.Context, value []byte) error {
	if err := checkValue(value); err != nil {
		return err
	}
	m := e.mutex()
	if m == nil {
		return recipeErr(codeNotHeld, nil, "not leading %s", e.path)
	}
	return m.setValue(ctx, value)
}

// Leader returns the current leader: the lowest candidate, with its value
// and token. ErrNoLeader if there is none.
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	for attempt := 0; ; attempt++ {
		names, _, err := e.c.Children(ctx, e.path)
		if errors.Is(err, ErrNoNode) {
			return LeaderInfo{}, recipeErr(codeNoLeader, nil, "%s has no leader", e.path)
		}
		if err != nil {
			return LeaderInfo{}, err
		}
		lowest := lowestCandidate(names)
		if lowest == "" {
			return LeaderInfo{}, recipeErr(codeNoLeader, nil, "%s has no leader", e.path)
		}
		node := api.Join(e.path, lowest)
		n, err := e.c.Get(ctx, node)
		if err == nil {
			var token uint64
			token, err = e.tokenOf(ctx, node)
			if err == nil {
				return LeaderInfo{Value: n.Value, Node: node, Token: token}, nil
			}
		}
		if !errors.Is(err, ErrNoNode) {
			return LeaderInfo{}, err
		}
		// It resigned between the reads: look again.
		sleepCtx(ctx, backoff(attempt))
		if ctx.Err() != nil {
			return LeaderInfo{}, ctx.Err()
		}
	}
}

// tokenOf is the fencing token of the lock node at node, as the cell
// computes it; no_node if it is gone.
func (e *Election) tokenOf(ctx context.Context, node string) (uint64, error) {
	st, err := e.c.lockStateNoSession(ctx, node)
	if err != nil {
		return 0, err
	}
	if !st.Exists {
		return 0, api.Errorf(api.CodeNoNode, "%s does not exist", node)
	}
	return st.Token, nil
}

// seqOf is the sequence number of a sequential node name with prefix.
func seqOf(name, prefix string) (uint64, bool) {
	if !strings.HasPrefix(name, prefix) || len(name) < len(prefix)+10 {
		return 0, false
	}
	n, err := strconv.ParseUint(name[len(name)-10:], 10, 64)
	return n, err == nil
}

// sortBySeq keeps the names with prefix and a sequence suffix, in
// sequence order.
func sortBySeq(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if _, ok := seqOf(n, prefix); ok {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := seqOf(out[i], prefix)
		b, _ := seqOf(out[j], prefix)
		return a < b
	})
	return out
}

// lowestCandidate is the first election node in sequence order.
func lowestCandidate(names []string) string {
	if c := sortBySeq(names, LockNodePrefix); len(c) > 0 {
		return c[0]
	}
	return ""
}

// Observe delivers the current leader, then the leader after every change
// (a new leader, or a Proclaim), with a zero LeaderInfo while nobody
// leads, until ctx ends or the client closes; then the channel is closed.
// It watches only the leader's node (and, while nobody leads, the
// election's children): a change wakes each observer once, never a herd of
// candidates. Errors are retried with backoff; a slow reader sees the
// latest state, not every intermediate one.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	out := make(chan LeaderInfo, 1)
	go func() {
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(e.c.ctx, cancel)
		defer stop()
		tokens := map[string]uint64{} // a node's token never changes
		var last *LeaderInfo
		for attempt := 0; ctx.Err() == nil; {
			cur, ch, err := e.observeOnce(ctx, tokens)
			if err != nil {
				sleepCtx(ctx, backoff(attempt))
				attempt++
				continue
			}
			if ch == nil {
				// It changed while we looked: read again (backing off if
				// it keeps doing so).
				if attempt > 2 {
					sleepCtx(ctx, backoff(attempt))
				}
				attempt++
				continue
			}
			attempt = 0
			if last == nil || last.Node != cur.Node || !bytes.Equal(last.Value, cur.Value) {
				select {
				case out <- cur:
				case <-ctx.Done():
					return
				}
				last = &cur
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
// (or the election node's creation) while nobody does. A nil channel
// (with a nil error) means it changed while we looked: read again, and
// report nothing yet.
func (e *Election) observeOnce(ctx context.Context, tokens map[string]uint64) (LeaderInfo, <-chan api.Event, error) {
	names, _, err := e.c.Children(ctx, e.path)
	if errors.Is(err, ErrNoNode) {
		_, exists, ch, err := e.c.GetW(ctx, e.path) // fires on its creation
		if err != nil || exists {
			return LeaderInfo{}, nil, err
		}
		return LeaderInfo{}, ch, nil
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
	token, ok := tokens[node]
	if !ok {
		token, err = e.tokenOf(ctx, node)
		if errors.Is(err, ErrNoNode) {
			return LeaderInfo{}, nil, nil
		}
		if err != nil {
			return LeaderInfo{}, nil, err
		}
		clear(tokens) // only the current leader's is worth keeping
		tokens[node] = token
	}
	return LeaderInfo{Value: n.Value, Node: node, Token: token}, ch, nil
}
