// Package fake is an in-process fake of a lockd cell, a double for unit
// tests and runnable examples only: it is not lockd and checks nothing
// lockd guarantees. It serves the HTTP API over real fasthttp on loopback
// with a tiny node tree, sessions with long-poll KeepAlives, one-shot
// watches, lock nodes and write dedupe by (session, request id), and lets
// a test move the leader, expire sessions and intercept any route.
//
// The sdk and ctl unit tests and the sdk examples share it, so there is one
// fake. It imports only api, the standard library and fasthttp.
package fake

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/valyala/fasthttp"
)

// Options configures a Cell. Zero values take the defaults noted.
type Options struct {
	Name     string   // cell name; "demo-cell"
	Prefixes []string // prefixes served; ["/demo"] (each prefix's root node exists)
	Replicas int      // replicas, each on its own loopback port; 1
	Epoch    uint64   // initial leader epoch; 1
	Term     uint64   // Raft term reported by /v1/status; the epoch
}

// Request is one request a replica received.
type Request struct {
	Replica int
	Route   string
	Body    []byte
	Auth    string // Authorization header
}

// WatchKey names a watch: a path and its kind.
type WatchKey struct {
	Path string
	Kind api.WatchKind
}

// Hook intercepts a request to replica on route; next runs the fake's own
// handling. The response is a status and a reply value (an *api.Error for
// an error; status 0 then takes the code's HTTP status). Hooks run without
// the cell's lock held, so they may call the Cell's methods.
type Hook func(replica int, route string, body []byte, next func() (int, any)) (int, any)

type session struct {
	id         uint64
	lease      time.Duration
	watches    map[WatchKey]bool
	pending    []api.Event
	results    map[uint64]result
	expired    bool
	ephemerals map[string]bool
}

type result struct {
	status int
	resp   any
}

type replica struct {
	idx  int
	addr string
	srv  *fasthttp.Server
	ln   net.Listener
	done chan struct{}
}

// Cell is a running fake cell. All methods are safe for concurrent use.
type Cell struct {
	name     string
	prefixes []string

	mu        sync.Mutex
	replicas  []*replica
	endpoints []string // as listed in the directory
	leader    int      // replica index; -1 for none
	hint      bool     // followers name the leader in not_leader
	epoch     uint64
	termDelta uint64 // term − epoch in status
	index     uint64
	nodes     map[string]*api.Node
	tombs     map[string]uint64
	seq       map[string]uint64
	evSeq     uint64 // last event seq handed out (grows for the cell's life)
	sessions  map[uint64]*session
	nextSess  uint64
	reqs      []Request
	hook      Hook
	wake      chan struct{} // closed and replaced on every change long-polls care about
	closed    chan struct{}
	closeOnce sync.Once
}

// New starts a fake cell whose replica 0 leads. Close it when done.
func New(o Options) (*Cell, error) {
	if o.Name == "" {
		o.Name = "demo-cell"
	}
	if len(o.Prefixes) == 0 {
		o.Prefixes = []string{"/demo"}
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Epoch == 0 {
		o.Epoch = 1
	}
	if o.Term < o.Epoch {
		o.Term = o.Epoch
	}
	c := &Cell{
		name:      o.Name,
		prefixes:  slices.Clone(o.Prefixes),
		hint:      true,
		epoch:     o.Epoch,
		termDelta: o.Term - o.Epoch,
		index:     1,
		nodes:     map[string]*api.Node{},
		tombs:     map[string]uint64{},
		seq:       map[string]uint64{},
		sessions:  map[uint64]*session{},
		wake:      make(chan struct{}),
		closed:    make(chan struct{}),
	}
	for _, p := range c.prefixes {
		c.nodes[p] = &api.Node{Path: p, Version: 1, CreateIndex: 1, ModifyIndex: 1}
	}
	for i := range o.Replicas {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.Close()
			return nil, err
		}
		r := &replica{idx: i, addr: ln.Addr().String(), ln: ln, done: make(chan struct{})}
		r.srv = &fasthttp.Server{
			Handler:               func(ctx *fasthttp.RequestCtx) { c.serve(r.idx, ctx) },
			MaxIdleWorkerDuration: 20 * time.Millisecond,
			IdleTimeout:           time.Second,
			CloseOnShutdown:       true,
		}
		c.replicas = append(c.replicas, r)
		c.endpoints = append(c.endpoints, r.addr)
		go func() {
			defer close(r.done)
			_ = r.srv.Serve(ln)
		}()
	}
	return c, nil
}

// Close stops every replica, ending long-polls in flight.
func (c *Cell) Close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		for _, r := range c.replicas {
			_ = r.srv.Shutdown()
			// A Shutdown that runs before Serve has registered the
			// listener leaves Serve accepting: close it ourselves.
			_ = r.ln.Close()
			<-r.done
		}
	})
}

// Name is the cell's name.
func (c *Cell) Name() string { return c.name }

// Addr is replica i's API address.
func (c *Cell) Addr(i int) string { return c.replicas[i].addr }

// Endpoints are the cell's endpoints as the directory lists them.
func (c *Cell) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.endpoints)
}

// SetEndpoints changes the endpoints the directory lists (say, to put a
// dead address first).
func (c *Cell) SetEndpoints(eps []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endpoints = slices.Clone(eps)
}

// SetLeader makes replica i the leader (-1: none) without a fail-over:
// same epoch, sessions and watches; long-polls in flight are not woken.
func (c *Cell) SetLeader(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = i
}

// SetHint sets whether followers name the leader in not_leader replies.
func (c *Cell) SetHint(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hint = on
}

// SetHook installs h (nil removes it).
func (c *Cell) SetHook(h Hook) {
	c.mu.Lock()
	c.hook = h
	c.mu.Unlock()
}

// Failover moves the leader to replica i and bumps the epoch; the new
// leader has none of the old one's in-memory watches or queued events.
func (c *Cell) Failover(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = i
	c.epoch++
	for _, s := range c.sessions {
		clear(s.watches)
		s.pending = nil
	}
	c.broadcastLocked()
}

// Expire ends a session as a lease running out would: its ephemeral nodes
// go, and every later request naming it gets session_expired.
func (c *Cell) Expire(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	if s == nil {
		return
	}
	s.expired = true
	for p := range s.ephemerals {
		c.deleteLocked(p)
	}
	c.broadcastLocked()
}

// Requests lists the requests received on route ("" for all), in order.
func (c *Cell) Requests(route string) []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Request
	for _, r := range c.reqs {
		if route == "" || r.Route == route {
			out = append(out, r)
		}
	}
	return out
}

// Armed reports whether session id has the watch key armed.
func (c *Cell) Armed(id uint64, key WatchKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	return s != nil && s.watches[key]
}

// Watches lists the watches armed for session id.
func (c *Cell) Watches(id uint64) []WatchKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []WatchKey
	if s := c.sessions[id]; s != nil {
		for k, on := range s.watches {
			if on {
				out = append(out, k)
			}
		}
	}
	return out
}

// Queue appends ev to session id's pending events and wakes its KeepAlive.
func (c *Cell) Queue(id uint64, ev api.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[id]; s != nil {
		s.pending = append(s.pending, ev)
	}
	c.broadcastLocked()
}

// DeleteQuietly deletes the node at path and, in the same step, drops
// every session's pending events, so no client hears of it.
func (c *Cell) DeleteQuietly(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleteLocked(path)
	for _, s := range c.sessions {
		s.pending = nil
	}
}

// Children lists the names of path's children, sorted.
func (c *Cell) Children(path string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.childrenLocked(path)
}

// Node returns the node at path.
func (c *Cell) Node(path string) (api.Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.nodes[path]
	if n == nil {
		return api.Node{}, false
	}
	return *n, true
}

// Handle runs the fake's own handling of a request as replica rep, as if
// it had arrived (without recording it or running the hook).
func (c *Cell) Handle(rep int, route string, body []byte) (int, any) {
	return c.handle(rep, route, body)
}

// broadcastLocked wakes every long-poll.
func (c *Cell) broadcastLocked() {
	close(c.wake)
	c.wake = make(chan struct{})
}

func (c *Cell) serve(rep int, ctx *fasthttp.RequestCtx) {
	route := string(ctx.Path())
	body := append([]byte(nil), ctx.PostBody()...)
	c.mu.Lock()
	c.reqs = append(c.reqs, Request{Replica: rep, Route: route, Body: body, Auth: string(ctx.Request.Header.Peek("Authorization"))})
	hook := c.hook
	c.mu.Unlock()

	next := func() (int, any) { return c.handle(rep, route, body) }
	var status int
	var resp any
	if hook != nil {
		status, resp = hook(rep, route, body, next)
	} else {
		status, resp = next()
	}
	if e, ok := resp.(*api.Error); ok {
		resp = api.ErrorResponse{Error: e}
		if status == 0 {
			status = e.Code.HTTPStatus()
		}
	}
	b, _ := json.Marshal(resp)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// Fail is an error reply for a Hook: the code's HTTP status and an *api.Error.
func Fail(code api.Code, format string, args ...any) (int, any) {
	return code.HTTPStatus(), api.Errorf(code, format, args...)
}

func (c *Cell) notLeaderLocked() (int, any) {
	e := api.Errorf(api.CodeNotLeader, "not the leader")
	if c.hint && c.leader >= 0 {
		e.Leader = c.replicas[c.leader].addr
	}
	return e.Code.HTTPStatus(), e
}

func (c *Cell) handle(rep int, route string, body []byte) (int, any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch route {
	case api.RouteDirectory:
		d := api.DirectoryResponse{Index: 1, Cells: []api.CellInfo{{Name: c.name, ShardID: 1, Prefixes: c.prefixes, Endpoints: c.endpoints}}}
		for _, p := range c.prefixes {
			d.Prefixes = append(d.Prefixes, api.PrefixInfo{Prefix: p, Cell: c.name, Epoch: 1})
		}
		return 200, d
	case api.RouteStatus:
		role := "follower"
		if rep == c.leader {
			role = "leader"
		}
		st := api.ReplicaStatus{Cell: c.name, ShardID: 1, ReplicaID: uint64(rep + 1), Role: role, Term: c.epoch + c.termDelta, AppliedIndex: c.index, Epoch: c.epoch}
		if c.leader >= 0 {
			st.LeaderID, st.LeaderAPI = uint64(c.leader+1), c.replicas[c.leader].addr
		}
		return 200, api.StatusResponse{ReplicaID: uint64(rep + 1), APIAddr: c.replicas[rep].addr, Cells: []api.ReplicaStatus{st}}
	}
	if rep != c.leader {
		return c.notLeaderLocked()
	}
	switch route {
	case api.RouteSessionOpen:
		var req api.OpenSessionRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return Fail(api.CodeBadRequest, "%v", err)
		}
		lease := time.Duration(req.LeaseMS) * time.Millisecond
		if lease == 0 {
			lease = api.DefaultLease
		}
		c.nextSess++
		c.index++
		s := &session{id: c.nextSess, lease: lease, watches: map[WatchKey]bool{}, results: map[uint64]result{}, ephemerals: map[string]bool{}}
		c.sessions[s.id] = s
		return 200, api.SessionResponse{Session: s.id, LeaseMS: lease.Milliseconds(), Epoch: c.epoch, Index: c.index}
	case api.RouteSessionKeepAlive:
		var req api.KeepAliveRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return Fail(api.CodeBadRequest, "%v", err)
		}
		return c.keepAliveLocked(rep, req)
	case api.RouteSessionClose:
		var req api.CloseSessionRequest
		_ = json.Unmarshal(body, &req)
		s := c.sessions[req.Session]
		if s == nil {
			return Fail(api.CodeNoSession, "no session %d", req.Session)
		}
		for p := range s.ephemerals {
			c.deleteLocked(p)
		}
		delete(c.sessions, req.Session)
		c.broadcastLocked()
		return 200, struct{}{}
	case api.RouteCreate:
		var req api.CreateRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return Fail(api.CodeBadRequest, "%v", err)
		}
		return c.dedupeLocked(req.WriteHeader, req.Ephemeral, func(s *session) (int, any) { return c.createLocked(req, s) })
	case api.RoutePut:
		var req api.PutRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return Fail(api.CodeBadRequest, "%v", err)
		}
		return c.dedupeLocked(req.WriteHeader, false, func(*session) (int, any) { return c.putLocked(req) })
	case api.RouteDelete:
		var req api.DeleteRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return Fail(api.CodeBadRequest, "%v", err)
		}
		return c.dedupeLocked(req.WriteHeader, false, func(*session) (int, any) {
			n := c.nodes[req.Path]
			switch {
			case n == nil:
				return Fail(api.CodeNoNode, "%s does not exist", req.Path)
			case n.NumChildren > 0:
				return Fail(api.CodeNotEmpty, "%s has children", req.Path)
			case req.Version != nil && *req.Version != n.Version:
				return Fail(api.CodeVersionMismatch, "%s is at version %d", req.Path, n.Version)
			}
			old := *n
			// As the real cell: the deleting session's own watches on the
			// node are consumed without an event.
			if s := c.sessions[req.Session]; s != nil {
				delete(s.watches, WatchKey{req.Path, api.WatchData})
				delete(s.watches, WatchKey{req.Path, api.WatchChildren})
			}
			c.deleteLocked(req.Path)
			return 200, api.WriteResponse{Node: old, Index: c.index}
		})
	case api.RouteGet, api.RouteChildren:
		var req api.ReadRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return Fail(api.CodeBadRequest, "%v", err)
		}
		var s *session
		if req.Watch != "" {
			if s = c.sessions[req.Session]; s == nil || s.expired {
				return Fail(api.CodeSessionExpired, "session %d is gone", req.Session)
			}
		}
		n := c.nodes[req.Path]
		if route == api.RouteGet {
			if n == nil && req.Watch != api.WatchData {
				return Fail(api.CodeNoNode, "%s does not exist", req.Path)
			}
			if s != nil {
				s.watches[WatchKey{req.Path, api.WatchData}] = true
			}
			if n == nil {
				return 200, api.GetResponse{Exists: false, Index: c.index}
			}
			return 200, api.GetResponse{Exists: true, Node: *n, Index: c.index}
		}
		if n == nil {
			return Fail(api.CodeNoNode, "%s does not exist", req.Path)
		}
		if s != nil {
			s.watches[WatchKey{req.Path, api.WatchChildren}] = true
		}
		return 200, api.ChildrenResponse{Node: *n, Children: c.childrenLocked(req.Path), Index: c.index}
	case api.RouteWatch:
		var req api.WatchRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return Fail(api.CodeBadRequest, "%v", err)
		}
		s := c.sessions[req.Session]
		if s == nil || s.expired {
			return Fail(api.CodeSessionExpired, "session %d is gone", req.Session)
		}
		for _, w := range req.Watches {
			n := c.nodes[w.Path]
			var changed uint64
			typ := api.EventDeleted
			switch {
			case n == nil:
				changed = c.tombs[w.Path]
			case w.Kind == api.WatchData:
				changed, typ = n.ModifyIndex, api.EventDataChanged
			default:
				changed, typ = n.ChildIndex, api.EventChildrenChanged
			}
			if changed > w.Since {
				s.pending = append(s.pending, api.Event{Type: typ, Path: w.Path, Kind: w.Kind, Index: changed})
			} else {
				s.watches[WatchKey{w.Path, w.Kind}] = true
			}
		}
		c.broadcastLocked()
		return 200, api.WatchResponse{Index: c.index}
	case api.RouteLockState:
		var req api.LockStateRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return Fail(api.CodeBadRequest, "%v", err)
		}
		// As the real cell: a session is needed only to arm the watch.
		n := c.nodes[req.Path]
		if n == nil || n.Lock == "" {
			return 200, api.LockStateResponse{Index: c.index}
		}
		token := api.MakeToken(1, n.CreateIndex)
		wf := c.predecessorLocked(req.Path)
		watched := req.Path // a holder watches its own node
		if wf != "" {
			wf = api.Join(api.Parent(req.Path), wf)
			watched = wf
		}
		if req.Watch {
			s := c.sessions[req.Session]
			if s == nil || s.expired {
				return Fail(api.CodeSessionExpired, "session %d is gone", req.Session)
			}
			s.watches[WatchKey{watched, api.WatchData}] = true
		}
		return 200, api.LockStateResponse{Exists: true, Held: wf == "", WaitFor: wf, Token: token, Version: n.Version, Index: c.index}
	}
	return Fail(api.CodeBadRequest, "no route %s", route)
}

func (c *Cell) keepAliveLocked(rep int, req api.KeepAliveRequest) (int, any) {
	deadline := time.Now().Add(time.Duration(req.WaitMS) * time.Millisecond)
	for {
		if rep != c.leader {
			return c.notLeaderLocked()
		}
		s := c.sessions[req.Session]
		switch {
		case s == nil:
			return Fail(api.CodeNoSession, "no session %d", req.Session)
		case s.expired:
			return Fail(api.CodeSessionExpired, "session %d expired", req.Session)
		}
		// As the real cell: events are numbered, re-sent until a KeepAlive
		// acknowledges them (ack_seq under the current epoch), then dropped.
		if req.AckEpoch == c.epoch {
			s.pending = slices.DeleteFunc(s.pending, func(ev api.Event) bool { return ev.Seq != 0 && ev.Seq <= req.AckSeq })
		}
		for i := range s.pending {
			if s.pending[i].Seq == 0 {
				c.evSeq++
				s.pending[i].Seq = c.evSeq
			}
		}
		if len(s.pending) > 0 || !time.Now().Before(deadline) {
			ev := slices.Clone(s.pending)
			return 200, api.SessionResponse{Session: s.id, LeaseMS: s.lease.Milliseconds(), Epoch: c.epoch, Index: c.index, Events: ev}
		}
		wake := c.wake
		c.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wake:
		case <-t.C:
		case <-c.closed:
		}
		t.Stop()
		c.mu.Lock()
		select {
		case <-c.closed:
			return Fail(api.CodeUnavailable, "shutting down")
		default:
		}
	}
}

// dedupeLocked applies a write once per (session, request id).
func (c *Cell) dedupeLocked(h api.WriteHeader, needSession bool, apply func(*session) (int, any)) (int, any) {
	if h.Session == 0 {
		if needSession {
			return Fail(api.CodeNoSession, "ephemeral create needs a session")
		}
		return apply(nil)
	}
	s := c.sessions[h.Session]
	if s == nil {
		return Fail(api.CodeNoSession, "no session %d", h.Session)
	}
	if s.expired {
		return Fail(api.CodeSessionExpired, "session %d expired", h.Session)
	}
	if r, ok := s.results[h.Request]; ok {
		return r.status, r.resp
	}
	status, resp := apply(s)
	s.results[h.Request] = result{status, resp}
	return status, resp
}

func (c *Cell) fireLocked(path string, kind api.WatchKind, typ api.EventType) {
	key := WatchKey{path, kind}
	for _, s := range c.sessions {
		if s.watches[key] {
			delete(s.watches, key)
			s.pending = append(s.pending, api.Event{Type: typ, Path: path, Kind: kind, Index: c.index})
		}
	}
	c.broadcastLocked()
}

func (c *Cell) addLocked(path string, value []byte, s *session, lock api.LockMode) *api.Node {
	c.index++
	n := &api.Node{Path: path, Value: value, Version: 1, CreateIndex: c.index, ModifyIndex: c.index, Lock: lock}
	if s != nil {
		n.Ephemeral, n.Owner = true, s.id
		s.ephemerals[path] = true
	}
	c.nodes[path] = n
	delete(c.tombs, path)
	if p := api.Parent(path); p != "/" {
		if pn := c.nodes[p]; pn != nil {
			pn.NumChildren++
			pn.ChildIndex = c.index
		}
		c.fireLocked(p, api.WatchChildren, api.EventChildrenChanged)
	}
	c.fireLocked(path, api.WatchData, api.EventCreated)
	return n
}

func (c *Cell) createLocked(req api.CreateRequest, s *session) (int, any) {
	if err := api.ValidatePath(req.Path); err != nil {
		return 400, err
	}
	parent := api.Parent(req.Path)
	if parent != "/" && c.nodes[parent] == nil {
		if !req.MakeParents {
			return Fail(api.CodeNoNode, "parent %s does not exist", parent)
		}
		var missing []string
		for p := parent; p != "/" && c.nodes[p] == nil; p = api.Parent(p) {
			missing = append(missing, p)
		}
		for i := len(missing) - 1; i >= 0; i-- {
			c.addLocked(missing[i], nil, nil, "")
		}
	}
	path := req.Path
	if req.Sequential {
		c.seq[parent]++
		path += fmt.Sprintf("%010d", c.seq[parent])
	}
	if c.nodes[path] != nil {
		return Fail(api.CodeNodeExists, "%s exists", path)
	}
	if !req.Ephemeral {
		s = nil
	}
	n := c.addLocked(path, req.Value, s, req.Lock)
	resp := api.CreateResponse{Node: *n, Index: c.index}
	if req.Lock != "" {
		// As the real cell: WaitFor is the predecessor's path, and a
		// deletion watch on it is armed for the session by the create.
		if wf := c.predecessorLocked(path); wf != "" {
			resp.WaitFor = api.Join(parent, wf)
			if s != nil {
				s.watches[WatchKey{resp.WaitFor, api.WatchData}] = true
			}
		} else {
			resp.Token = api.MakeToken(1, n.CreateIndex)
			if s != nil {
				s.watches[WatchKey{path, api.WatchData}] = true // the holder's own-node watch
			}
		}
	}
	return 200, resp
}

func (c *Cell) putLocked(req api.PutRequest) (int, any) {
	n := c.nodes[req.Path]
	switch {
	case n == nil && req.Version != nil && *req.Version != 0:
		return Fail(api.CodeNoNode, "%s does not exist", req.Path)
	case n != nil && req.Version != nil && *req.Version == 0:
		return Fail(api.CodeNodeExists, "%s exists", req.Path)
	case n != nil && req.Version != nil && *req.Version != n.Version:
		return Fail(api.CodeVersionMismatch, "%s is at version %d", req.Path, n.Version)
	}
	if n == nil {
		if p := api.Parent(req.Path); p != "/" && c.nodes[p] == nil {
			if !req.MakeParents {
				return Fail(api.CodeNoNode, "parent %s does not exist", p)
			}
			c.createLocked(api.CreateRequest{Path: p, MakeParents: true}, nil)
		}
		n = c.addLocked(req.Path, req.Value, nil, "")
		return 200, api.WriteResponse{Node: *n, Index: c.index}
	}
	c.index++
	n.Value, n.Version, n.ModifyIndex = req.Value, n.Version+1, c.index
	c.fireLocked(req.Path, api.WatchData, api.EventDataChanged)
	return 200, api.WriteResponse{Node: *n, Index: c.index}
}

func (c *Cell) deleteLocked(path string) {
	if c.nodes[path] == nil {
		return
	}
	c.index++
	delete(c.nodes, path)
	c.tombs[path] = c.index
	for _, s := range c.sessions {
		delete(s.ephemerals, path)
	}
	if pn := c.nodes[api.Parent(path)]; pn != nil {
		pn.NumChildren--
		pn.ChildIndex = c.index
		c.fireLocked(pn.Path, api.WatchChildren, api.EventChildrenChanged)
	}
	c.fireLocked(path, api.WatchData, api.EventDeleted)
	c.fireLocked(path, api.WatchChildren, api.EventDeleted)
}

func (c *Cell) childrenLocked(path string) []string {
	var out []string
	for p := range c.nodes {
		if api.Parent(p) == path {
			out = append(out, api.Base(p))
		}
	}
	sort.Strings(out)
	return out
}

// predecessorLocked is the lock sibling path waits for, as the real cell
// decides it: in sequence (creation) order, an exclusive node waits for
// the nearest lower lock node of either mode, a shared node for the
// nearest lower exclusive one. "" means path holds the lock.
func (c *Cell) predecessorLocked(path string) string {
	var sibs []*api.Node
	for _, name := range c.childrenLocked(api.Parent(path)) {
		if n := c.nodes[api.Join(api.Parent(path), name)]; n != nil && n.Lock != "" {
			sibs = append(sibs, n)
		}
	}
	sort.Slice(sibs, func(i, j int) bool { return sibs[i].CreateIndex < sibs[j].CreateIndex })
	i := slices.IndexFunc(sibs, func(n *api.Node) bool { return n.Path == path })
	me := c.nodes[path]
	for j := i - 1; j >= 0; j-- {
		if me.Lock == api.LockExclusive || sibs[j].Lock == api.LockExclusive {
			return api.Base(sibs[j].Path)
		}
	}
	return ""
}

// DeadAddr is a loopback address nothing listens on.
func DeadAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	a := ln.Addr().String()
	_ = ln.Close()
	return a, nil
}
