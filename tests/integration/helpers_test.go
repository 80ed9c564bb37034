package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// callTimeout bounds one API call (with its retries) in these tests.
const callTimeout = 30 * time.Second

func ctxFor(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// do is one API call, bounded by callTimeout.
func do(cl *cluster.Client, route string, req, resp any) error {
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	return cl.Do(ctx, route, req, resp)
}

// mustDo is do failing the test on error. Test goroutine only.
func mustDo(t testing.TB, cl *cluster.Client, route string, req, resp any) {
	t.Helper()
	if err := do(cl, route, req, resp); err != nil {
		t.Fatalf("%s %+v: %v", route, req, err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// session is a client session: an id, request ids for deduplicated
// writes, and (once started) a keepalive loop that long-polls and forwards
// watch events.
type session struct {
	cl    *cluster.Client
	cell  string
	id    uint64
	lease time.Duration
	req   atomic.Uint64

	secret string // sent with every request naming the session
	events chan api.Event
	ctx    context.Context
	cancel context.CancelFunc
	kaDone chan struct{}

	oks       atomic.Uint64 // successful keepalives
	transient atomic.Uint64 // keepalive calls that failed and were retried
	lastEpoch atomic.Uint64 // leader epoch of the last successful keepalive
	deadMu    sync.Mutex
	dead      error // the error that ended the loop: session_expired, no_session
}

func openSession(t testing.TB, cl *cluster.Client, cell string, lease time.Duration) *session {
	t.Helper()
	s, err := tryOpenSession(cl, cell, lease)
	if err != nil {
		t.Fatalf("open session on %s: %v", cell, err)
	}
	return s
}

func tryOpenSession(cl *cluster.Client, cell string, lease time.Duration) (*session, error) {
	var resp api.SessionResponse
	if err := do(cl, api.RouteSessionOpen, api.OpenSessionRequest{Cell: cell, LeaseMS: lease.Milliseconds()}, &resp); err != nil {
		return nil, err
	}
	if resp.Session == 0 {
		return nil, fmt.Errorf("open session: no id in %+v", resp)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{cl: cl, cell: cell, id: resp.Session, secret: resp.Secret, lease: time.Duration(resp.LeaseMS) * time.Millisecond,
		events: make(chan api.Event, 4096), ctx: ctx, cancel: cancel}
	s.lastEpoch.Store(resp.Epoch)
	return s, nil
}

// header is a write header with the next request id. The session's writes
// must be sequential (one goroutine): Ack says every earlier id has its reply.
func (s *session) header() api.WriteHeader {
	r := s.req.Add(1)
	return api.WriteHeader{Session: s.id, Secret: s.secret, Request: r, Ack: r}
}

// keepAlive starts the keepalive loop: long-polls of every wait, each
// retried through fail-overs by the client, until stop or until the
// session is reported ended.
func (s *session) keepAlive(wait time.Duration) {
	s.kaDone = make(chan struct{})
	go func() {
		defer close(s.kaDone)
		for i := 0; i < 1_000_000 && s.ctx.Err() == nil; i++ {
			ctx, cancel := context.WithTimeout(s.ctx, wait+callTimeout)
			var resp api.SessionResponse
			err := s.cl.Do(ctx, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: s.cell, Session: s.id, Secret: s.secret, WaitMS: wait.Milliseconds()}, &resp)
			cancel()
			if s.ctx.Err() != nil {
				return
			}
			if err != nil {
				if c := api.CodeOf(err); c == api.CodeSessionExpired || c == api.CodeNoSession {
					s.deadMu.Lock()
					s.dead = err
					s.deadMu.Unlock()
					return
				}
				s.transient.Add(1)
				select {
				case <-s.ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
				continue
			}
			s.lastEpoch.Store(resp.Epoch)
			s.oks.Add(1)
			for _, ev := range resp.Events {
				select {
				case s.events <- ev:
				case <-s.ctx.Done():
					return
				}
			}
		}
	}()
}

// deadErr is the error that ended the keepalive loop, nil while it runs.
func (s *session) deadErr() error {
	s.deadMu.Lock()
	defer s.deadMu.Unlock()
	return s.dead
}

// stop ends the keepalive loop (the session lives on until its lease ends).
func (s *session) stop() {
	s.cancel()
	if s.kaDone != nil {
		<-s.kaDone
	}
}

// close stops the keepalive loop and closes the session.
func (s *session) close() error {
	s.stop()
	err := do(s.cl, api.RouteSessionClose, api.CloseSessionRequest{Cell: s.cell, Session: s.id, Secret: s.secret}, nil)
	if api.CodeOf(err) == api.CodeSessionExpired {
		return nil
	}
	return err
}

// waitEvent waits up to d for an event on path (a resync counts); events on
// other paths are stale and dropped.
func (s *session) waitEvent(path string, d time.Duration) (api.Event, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev := <-s.events:
			if ev.Path == path || ev.Type == api.EventResync {
				return ev, true
			}
		case <-timer.C:
			return api.Event{}, false
		}
	}
}

// lockGrant is one acquisition as its holder saw it.
type lockGrant struct {
	session    uint64
	path       string
	token      uint64
	createIdx  uint64 // create index of the lock node
	grantIdx   uint64 // server index at which the holder learned it holds
	releaseIdx uint64 // index of the delete that released it
	granted    time.Time
	released   time.Time
	waits      int // wake-ups before the grant
	fallbacks  int // wake-ups by timeout instead of by event
}

// eventWait is how long a waiter waits for its predecessor's event before
// re-checking anyway. Events should always come first on a healthy cluster;
// a re-check that finds the predecessor gone is a fallback, counted and
// reported.
const eventWait = 5 * time.Second

// acquire runs the lock recipe on dir: create an exclusive lock node; while
// it waits, wait for the event on the predecessor (armed by the create or
// by the last lock/state), then re-check with lock/state, re-arming the watch.
func (s *session) acquire(dir string) (lockGrant, error) {
	g := lockGrant{session: s.id}
	var cr api.CreateResponse
	err := do(s.cl, api.RouteCreate, api.CreateRequest{WriteHeader: s.header(), Path: dir + "/n-",
		Ephemeral: true, Sequential: true, Lock: api.LockExclusive, MakeParents: true}, &cr)
	if err != nil {
		return g, fmt.Errorf("create lock node in %s: %w", dir, err)
	}
	g.path, g.token, g.createIdx = cr.Node.Path, cr.Token, cr.Node.CreateIndex
	if cr.WaitFor == "" {
		g.grantIdx, g.granted = cr.Index, time.Now()
		return g, nil
	}
	waitFor := cr.WaitFor
	for i := 0; i < 10_000; i++ {
		_, evented := s.waitEvent(waitFor, eventWait)
		g.waits++
		var ls api.LockStateResponse
		if err := do(s.cl, api.RouteLockState, api.LockStateRequest{Path: g.path, Session: s.id, Secret: s.secret, Watch: true}, &ls); err != nil {
			return g, fmt.Errorf("lock state of %s: %w", g.path, err)
		}
		if !ls.Exists {
			return g, fmt.Errorf("lock node %s of session %d vanished while waiting", g.path, s.id)
		}
		if ls.Token != g.token {
			return g, fmt.Errorf("lock state token %d of %s, create said %d", ls.Token, g.path, g.token)
		}
		// A timeout is a missed event only if the predecessor had gone: a
		// waiter deep in the line may rightly wait longer than eventWait.
		if !evented && (ls.Held || ls.WaitFor != waitFor) {
			g.fallbacks++
		}
		if ls.Held {
			g.grantIdx, g.granted = ls.Index, time.Now()
			return g, nil
		}
		waitFor = ls.WaitFor
	}
	return g, fmt.Errorf("%s: no grant after 10000 wake-ups", g.path)
}

// release deletes the lock node and records the delete's index.
func (s *session) release(g *lockGrant) error {
	g.released = time.Now()
	var wr api.WriteResponse
	if err := do(s.cl, api.RouteDelete, api.DeleteRequest{WriteHeader: s.header(), Path: g.path}, &wr); err != nil {
		return fmt.Errorf("delete %s: %w", g.path, err)
	}
	g.releaseIdx = wr.Index
	return nil
}

// snapshot is every node under a root, by path, values included.
type snapshot map[string]api.Node

// walk reads the tree under root with linearizable get and children calls.
func walk(cl *cluster.Client, root string) (snapshot, error) {
	snap := snapshot{}
	queue := []string{root}
	for steps := 0; len(queue) > 0; steps++ {
		if steps > 100_000 {
			return nil, fmt.Errorf("walk %s: over 100000 nodes", root)
		}
		p := queue[0]
		queue = queue[1:]
		var g api.GetResponse
		if err := do(cl, api.RouteGet, api.ReadRequest{Path: p}, &g); err != nil {
			return nil, fmt.Errorf("get %s: %w", p, err)
		}
		var ch api.ChildrenResponse
		if err := do(cl, api.RouteChildren, api.ReadRequest{Path: p}, &ch); err != nil {
			return nil, fmt.Errorf("children %s: %w", p, err)
		}
		if len(ch.Children) != g.Node.NumChildren {
			return nil, fmt.Errorf("%s: get says %d children, children lists %d", p, g.Node.NumChildren, len(ch.Children))
		}
		snap[p] = g.Node
		for _, name := range ch.Children {
			queue = append(queue, api.Join(p, name))
		}
	}
	return snap, nil
}

// diff describes how two snapshots differ, "" if they are the same.
func diff(before, after snapshot) string {
	var out []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			out = append(out, "removed "+p)
		case a.Version != b.Version || a.CreateIndex != b.CreateIndex || a.ModifyIndex != b.ModifyIndex ||
			a.ChildIndex != b.ChildIndex || a.NumChildren != b.NumChildren || a.Ephemeral != b.Ephemeral ||
			a.Owner != b.Owner || a.Lock != b.Lock || string(a.Value) != string(b.Value):
			out = append(out, fmt.Sprintf("changed %s: %+v -> %+v", p, b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, "added "+p)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprint(out)
}

// measureFailover returns how long after start a write first succeeds:
// the caller killed the leader at start, so the write commits under the
// new leader.
func measureFailover(cl *cluster.Client, start time.Time, path string) (time.Duration, error) {
	ctx, cancel := ctxFor(60 * time.Second)
	defer cancel()
	var wr api.WriteResponse
	if err := cl.Do(ctx, api.RoutePut, api.PutRequest{Path: path, Value: []byte(start.String()), MakeParents: true}, &wr); err != nil {
		return 0, fmt.Errorf("first write after the kill: %w", err)
	}
	return time.Since(start), nil
}

// leaderKill kills the demo leader and returns its id and the kill time.
func leaderKill(t *testing.T, c *cluster.Cluster) (int, time.Time) {
	t.Helper()
	leader, err := c.WaitLeader("demo", 30*time.Second)
	must(t, err)
	start := time.Now()
	must(t, c.Kill(leader))
	t.Logf("killed demo leader replica %d (SIGKILL)", leader)
	return leader, start
}

// isCode reports whether err is an *api.Error with code.
func isCode(err error, code api.Code) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Code == code
}
