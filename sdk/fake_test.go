package sdk

// An in-process fake of a lockd cell, for unit tests only. It serves the
// API over real fasthttp on loopback, keeps a tiny node tree, sessions with
// long-poll KeepAlives, one-shot watches and write dedupe, and lets a test
// move the leader, expire sessions and intercept any route.

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/valyala/fasthttp"
)

type fakeReq struct {
	replica int
	route   string
	body    []byte
	auth    string
}

// hookFunc intercepts a request; next runs the fake's own handling.
type hookFunc func(replica int, route string, body []byte, next func() (int, any)) (int, any)

type fakeSession struct {
	id         uint64
	lease      time.Duration
	watches    map[watchKey]bool
	pending    []api.Event
	results    map[uint64]fakeResult
	expired    bool
	ephemerals map[string]bool
}

type fakeResult struct {
	status int
	resp   any
}

type fakeReplica struct {
	idx  int
	addr string
	ln   net.Listener
	srv  *fasthttp.Server
	done chan struct{}
}

type fakeCell struct {
	t        testing.TB
	name     string
	prefixes []string

	mu        sync.Mutex
	replicas  []*fakeReplica
	endpoints []string // as listed in the directory
	leader    int      // replica index; -1 for none
	hint      bool     // followers name the leader in not_leader
	epoch     uint64
	index     uint64
	nodes     map[string]*api.Node
	tombs     map[string]uint64
	seq       map[string]uint64
	sessions  map[uint64]*fakeSession
	nextSess  uint64
	reqs      []fakeReq
	hook      hookFunc
	wake      chan struct{} // closed and replaced on every change long-polls care about
	closed    chan struct{}
	closeOnce sync.Once
}

func newFakeCell(t testing.TB, replicas int) *fakeCell {
	t.Helper()
	fc := &fakeCell{
		t:        t,
		name:     "demo-cell",
		prefixes: []string{"/demo"},
		leader:   0,
		hint:     true,
		epoch:    1,
		index:    1,
		nodes:    map[string]*api.Node{"/demo": {Path: "/demo", Version: 1, CreateIndex: 1, ModifyIndex: 1}},
		tombs:    map[string]uint64{},
		seq:      map[string]uint64{},
		sessions: map[uint64]*fakeSession{},
		wake:     make(chan struct{}),
		closed:   make(chan struct{}),
	}
	for i := range replicas {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r := &fakeReplica{idx: i, addr: ln.Addr().String(), ln: ln, done: make(chan struct{})}
		r.srv = &fasthttp.Server{
			Handler:               func(ctx *fasthttp.RequestCtx) { fc.serve(r.idx, ctx) },
			MaxIdleWorkerDuration: 20 * time.Millisecond,
			IdleTimeout:           time.Second,
			CloseOnShutdown:       true,
		}
		fc.replicas = append(fc.replicas, r)
		fc.endpoints = append(fc.endpoints, r.addr)
		go func() {
			defer close(r.done)
			_ = r.srv.Serve(ln)
		}()
	}
	t.Cleanup(fc.close)
	return fc
}

func (fc *fakeCell) addr(i int) string { return fc.replicas[i].addr }

func (fc *fakeCell) close() {
	fc.closeOnce.Do(func() {
		close(fc.closed)
		for _, r := range fc.replicas {
			_ = r.srv.Shutdown()
			<-r.done
		}
	})
}

// broadcastLocked wakes every long-poll.
func (fc *fakeCell) broadcastLocked() {
	close(fc.wake)
	fc.wake = make(chan struct{})
}

func (fc *fakeCell) setHook(h hookFunc) {
	fc.mu.Lock()
	fc.hook = h
	fc.mu.Unlock()
}

// failover moves the leader and bumps the epoch; the new leader has none
// of the old one's in-memory watches or queued events.
func (fc *fakeCell) failover(newLeader int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.leader = newLeader
	fc.epoch++
	for _, s := range fc.sessions {
		clear(s.watches)
		s.pending = nil
	}
	fc.broadcastLocked()
}

// expire ends a session as a lease running out would.
func (fc *fakeCell) expire(id uint64) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	s := fc.sessions[id]
	if s == nil {
		return
	}
	s.expired = true
	for p := range s.ephemerals {
		fc.deleteLocked(p)
	}
	fc.broadcastLocked()
}

func (fc *fakeCell) requests(route string) []fakeReq {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []fakeReq
	for _, r := range fc.reqs {
		if route == "" || r.route == route {
			out = append(out, r)
		}
	}
	return out
}

func (fc *fakeCell) armed(id uint64, key watchKey) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	s := fc.sessions[id]
	return s != nil && s.watches[key]
}

func (fc *fakeCell) serve(rep int, ctx *fasthttp.RequestCtx) {
	route := string(ctx.Path())
	body := append([]byte(nil), ctx.PostBody()...)
	fc.mu.Lock()
	fc.reqs = append(fc.reqs, fakeReq{replica: rep, route: route, body: body, auth: string(ctx.Request.Header.Peek("Authorization"))})
	hook := fc.hook
	fc.mu.Unlock()

	next := func() (int, any) { return fc.handle(rep, route, body) }
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

func fail(code api.Code, format string, args ...any) (int, any) {
	return code.HTTPStatus(), api.Errorf(code, format, args...)
}

func (fc *fakeCell) notLeaderLocked() (int, any) {
	e := api.Errorf(api.CodeNotLeader, "not the leader")
	if fc.hint && fc.leader >= 0 {
		e.Leader = fc.replicas[fc.leader].addr
	}
	return e.Code.HTTPStatus(), e
}

func (fc *fakeCell) handle(rep int, route string, body []byte) (int, any) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	switch route {
	case api.RouteDirectory:
		return 200, api.DirectoryResponse{Cells: []api.CellInfo{{Name: fc.name, ShardID: 1, Prefixes: fc.prefixes, Epoch: 1, Endpoints: fc.endpoints}}}
	case api.RouteStatus:
		role := "follower"
		if rep == fc.leader {
			role = "leader"
		}
		st := api.ReplicaStatus{Cell: fc.name, ShardID: 1, ReplicaID: uint64(rep + 1), Role: role, Term: fc.epoch, AppliedIndex: fc.index, Epoch: fc.epoch}
		if fc.leader >= 0 {
			st.LeaderID, st.LeaderAPI = uint64(fc.leader+1), fc.replicas[fc.leader].addr
		}
		return 200, api.StatusResponse{ReplicaID: uint64(rep + 1), APIAddr: fc.replicas[rep].addr, Cells: []api.ReplicaStatus{st}}
	}
	if rep != fc.leader {
		return fc.notLeaderLocked()
	}
	switch route {
	case api.RouteSessionOpen:
		var req api.OpenSessionRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return fail(api.CodeBadRequest, "%v", err)
		}
		lease := time.Duration(req.LeaseMS) * time.Millisecond
		if lease == 0 {
			lease = api.DefaultLease
		}
		fc.nextSess++
		fc.index++
		s := &fakeSession{id: fc.nextSess, lease: lease, watches: map[watchKey]bool{}, results: map[uint64]fakeResult{}, ephemerals: map[string]bool{}}
		fc.sessions[s.id] = s
		return 200, api.SessionResponse{Session: s.id, LeaseMS: lease.Milliseconds(), Epoch: fc.epoch, Index: fc.index}
	case api.RouteSessionKeepAlive:
		var req api.KeepAliveRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return fail(api.CodeBadRequest, "%v", err)
		}
		return fc.keepAliveLocked(rep, req)
	case api.RouteSessionClose:
		var req api.CloseSessionRequest
		_ = json.Unmarshal(body, &req)
		s := fc.sessions[req.Session]
		if s == nil {
			return fail(api.CodeNoSession, "no session %d", req.Session)
		}
		for p := range s.ephemerals {
			fc.deleteLocked(p)
		}
		delete(fc.sessions, req.Session)
		fc.broadcastLocked()
		return 200, struct{}{}
	case api.RouteCreate:
		var req api.CreateRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return fail(api.CodeBadRequest, "%v", err)
		}
		return fc.dedupeLocked(req.WriteHeader, req.Ephemeral, func(s *fakeSession) (int, any) { return fc.createLocked(req, s) })
	case api.RoutePut:
		var req api.PutRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return fail(api.CodeBadRequest, "%v", err)
		}
		return fc.dedupeLocked(req.WriteHeader, false, func(*fakeSession) (int, any) { return fc.putLocked(req) })
	case api.RouteDelete:
		var req api.DeleteRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return fail(api.CodeBadRequest, "%v", err)
		}
		return fc.dedupeLocked(req.WriteHeader, false, func(*fakeSession) (int, any) {
			n := fc.nodes[req.Path]
			switch {
			case n == nil:
				return fail(api.CodeNoNode, "%s does not exist", req.Path)
			case n.NumChildren > 0:
				return fail(api.CodeNotEmpty, "%s has children", req.Path)
			case req.Version != nil && *req.Version != n.Version:
				return fail(api.CodeVersionMismatch, "%s is at version %d", req.Path, n.Version)
			}
			old := *n
			fc.deleteLocked(req.Path)
			return 200, api.WriteResponse{Node: old, Index: fc.index}
		})
	case api.RouteGet, api.RouteChildren:
		var req api.ReadRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return fail(api.CodeBadRequest, "%v", err)
		}
		var s *fakeSession
		if req.Watch != "" {
			if s = fc.sessions[req.Session]; s == nil || s.expired {
				return fail(api.CodeSessionExpired, "session %d is gone", req.Session)
			}
		}
		n := fc.nodes[req.Path]
		if route == api.RouteGet {
			if n == nil && req.Watch != api.WatchData {
				return fail(api.CodeNoNode, "%s does not exist", req.Path)
			}
			if s != nil {
				s.watches[watchKey{req.Path, api.WatchData}] = true
			}
			if n == nil {
				return 200, api.GetResponse{Exists: false, Index: fc.index}
			}
			return 200, api.GetResponse{Exists: true, Node: *n, Index: fc.index}
		}
		if n == nil {
			return fail(api.CodeNoNode, "%s does not exist", req.Path)
		}
		if s != nil {
			s.watches[watchKey{req.Path, api.WatchChildren}] = true
		}
		return 200, api.ChildrenResponse{Node: *n, Children: fc.childrenLocked(req.Path), Index: fc.index}
	case api.RouteWatch:
		var req api.WatchRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return fail(api.CodeBadRequest, "%v", err)
		}
		s := fc.sessions[req.Session]
		if s == nil || s.expired {
			return fail(api.CodeSessionExpired, "session %d is gone", req.Session)
		}
		for _, w := range req.Watches {
			n := fc.nodes[w.Path]
			var changed uint64
			typ := api.EventDeleted
			switch {
			case n == nil:
				changed = fc.tombs[w.Path]
			case w.Kind == api.WatchData:
				changed, typ = n.ModifyIndex, api.EventDataChanged
			default:
				changed, typ = n.ChildIndex, api.EventChildrenChanged
			}
			if changed > w.Since {
				s.pending = append(s.pending, api.Event{Type: typ, Path: w.Path, Kind: w.Kind, Index: changed})
			} else {
				s.watches[watchKey{w.Path, w.Kind}] = true
			}
		}
		fc.broadcastLocked()
		return 200, api.WatchResponse{Index: fc.index}
	case api.RouteLockState:
		var req api.LockStateRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return fail(api.CodeBadRequest, "%v", err)
		}
		// As the real cell: a session is needed only to arm the watch.
		n := fc.nodes[req.Path]
		if n == nil || n.Lock == "" {
			return 200, api.LockStateResponse{Index: fc.index}
		}
		token := api.MakeToken(1, n.CreateIndex)
		wf := fc.predecessorLocked(req.Path)
		if wf == "" {
			return 200, api.LockStateResponse{Exists: true, Held: true, Token: token, Index: fc.index}
		}
		wf = api.Join(api.Parent(req.Path), wf)
		if req.Watch {
			s := fc.sessions[req.Session]
			if s == nil || s.expired {
				return fail(api.CodeSessionExpired, "session %d is gone", req.Session)
			}
			s.watches[watchKey{wf, api.WatchData}] = true
		}
		return 200, api.LockStateResponse{Exists: true, WaitFor: wf, Token: token, Index: fc.index}
	}
	return fail(api.CodeBadRequest, "no route %s", route)
}

func (fc *fakeCell) keepAliveLocked(rep int, req api.KeepAliveRequest) (int, any) {
	deadline := time.Now().Add(time.Duration(req.WaitMS) * time.Millisecond)
	for {
		if rep != fc.leader {
			return fc.notLeaderLocked()
		}
		s := fc.sessions[req.Session]
		switch {
		case s == nil:
			return fail(api.CodeNoSession, "no session %d", req.Session)
		case s.expired:
			return fail(api.CodeSessionExpired, "session %d expired", req.Session)
		}
		if len(s.pending) > 0 || !time.Now().Before(deadline) {
			ev := s.pending
			s.pending = nil
			return 200, api.SessionResponse{Session: s.id, LeaseMS: s.lease.Milliseconds(), Epoch: fc.epoch, Index: fc.index, Events: ev}
		}
		wake := fc.wake
		fc.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wake:
		case <-t.C:
		case <-fc.closed:
		}
		t.Stop()
		fc.mu.Lock()
		select {
		case <-fc.closed:
			return fail(api.CodeUnavailable, "shutting down")
		default:
		}
	}
}

// dedupeLocked applies a write once per (session, request id).
func (fc *fakeCell) dedupeLocked(h api.WriteHeader, needSession bool, apply func(*fakeSession) (int, any)) (int, any) {
	if h.Session == 0 {
		if needSession {
			return fail(api.CodeNoSession, "ephemeral create needs a session")
		}
		return apply(nil)
	}
	s := fc.sessions[h.Session]
	if s == nil {
		return fail(api.CodeNoSession, "no session %d", h.Session)
	}
	if s.expired {
		return fail(api.CodeSessionExpired, "session %d expired", h.Session)
	}
	if r, ok := s.results[h.Request]; ok {
		return r.status, r.resp
	}
	status, resp := apply(s)
	s.results[h.Request] = fakeResult{status, resp}
	return status, resp
}

func (fc *fakeCell) fireLocked(path string, kind api.WatchKind, typ api.EventType) {
	key := watchKey{path, kind}
	for _, s := range fc.sessions {
		if s.watches[key] {
			delete(s.watches, key)
			s.pending = append(s.pending, api.Event{Type: typ, Path: path, Kind: kind, Index: fc.index})
		}
	}
	fc.broadcastLocked()
}

func (fc *fakeCell) addLocked(path string, value []byte, s *fakeSession, lock api.LockMode) *api.Node {
	fc.index++
	n := &api.Node{Path: path, Value: value, Version: 1, CreateIndex: fc.index, ModifyIndex: fc.index, Lock: lock}
	if s != nil {
		n.Ephemeral, n.Owner = true, s.id
		s.ephemerals[path] = true
	}
	fc.nodes[path] = n
	delete(fc.tombs, path)
	if p := api.Parent(path); p != "/" {
		if pn := fc.nodes[p]; pn != nil {
			pn.NumChildren++
			pn.ChildIndex = fc.index
		}
		fc.fireLocked(p, api.WatchChildren, api.EventChildrenChanged)
	}
	fc.fireLocked(path, api.WatchData, api.EventCreated)
	return n
}

func (fc *fakeCell) createLocked(req api.CreateRequest, s *fakeSession) (int, any) {
	if err := api.ValidatePath(req.Path); err != nil {
		return 400, err
	}
	parent := api.Parent(req.Path)
	if parent != "/" && fc.nodes[parent] == nil {
		if !req.MakeParents {
			return fail(api.CodeNoNode, "parent %s does not exist", parent)
		}
		var missing []string
		for p := parent; p != "/" && fc.nodes[p] == nil; p = api.Parent(p) {
			missing = append(missing, p)
		}
		for i := len(missing) - 1; i >= 0; i-- {
			fc.addLocked(missing[i], nil, nil, "")
		}
	}
	path := req.Path
	if req.Sequential {
		fc.seq[parent]++
		path += fmt.Sprintf("%010d", fc.seq[parent])
	}
	if fc.nodes[path] != nil {
		return fail(api.CodeNodeExists, "%s exists", path)
	}
	if !req.Ephemeral {
		s = nil
	}
	n := fc.addLocked(path, req.Value, s, req.Lock)
	resp := api.CreateResponse{Node: *n, Index: fc.index}
	if req.Lock != "" {
		// As the real cell: WaitFor is the predecessor's path, and a
		// deletion watch on it is armed for the session by the create.
		if wf := fc.predecessorLocked(path); wf != "" {
			resp.WaitFor = api.Join(parent, wf)
			s.watches[watchKey{resp.WaitFor, api.WatchData}] = true
		} else {
			resp.Token = api.MakeToken(1, n.CreateIndex)
		}
	}
	return 200, resp
}

func (fc *fakeCell) putLocked(req api.PutRequest) (int, any) {
	n := fc.nodes[req.Path]
	switch {
	case n == nil && req.Version != nil && *req.Version != 0:
		return fail(api.CodeNoNode, "%s does not exist", req.Path)
	case n != nil && req.Version != nil && *req.Version == 0:
		return fail(api.CodeNodeExists, "%s exists", req.Path)
	case n != nil && req.Version != nil && *req.Version != n.Version:
		return fail(api.CodeVersionMismatch, "%s is at version %d", req.Path, n.Version)
	}
	if n == nil {
		if p := api.Parent(req.Path); p != "/" && fc.nodes[p] == nil {
			return fail(api.CodeNoNode, "parent %s does not exist", p)
		}
		n = fc.addLocked(req.Path, req.Value, nil, "")
		return 200, api.WriteResponse{Node: *n, Index: fc.index}
	}
	fc.index++
	n.Value, n.Version, n.ModifyIndex = req.Value, n.Version+1, fc.index
	fc.fireLocked(req.Path, api.WatchData, api.EventDataChanged)
	return 200, api.WriteResponse{Node: *n, Index: fc.index}
}

func (fc *fakeCell) deleteLocked(path string) {
	if fc.nodes[path] == nil {
		return
	}
	fc.index++
	delete(fc.nodes, path)
	fc.tombs[path] = fc.index
	for _, s := range fc.sessions {
		delete(s.ephemerals, path)
	}
	if pn := fc.nodes[api.Parent(path)]; pn != nil {
		pn.NumChildren--
		pn.ChildIndex = fc.index
		fc.fireLocked(pn.Path, api.WatchChildren, api.EventChildrenChanged)
	}
	fc.fireLocked(path, api.WatchData, api.EventDeleted)
	fc.fireLocked(path, api.WatchChildren, api.EventDeleted)
}

func (fc *fakeCell) childrenLocked(path string) []string {
	var out []string
	for p := range fc.nodes {
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
func (fc *fakeCell) predecessorLocked(path string) string {
	var sibs []*api.Node
	for _, name := range fc.childrenLocked(api.Parent(path)) {
		if n := fc.nodes[api.Join(api.Parent(path), name)]; n != nil && n.Lock != "" {
			sibs = append(sibs, n)
		}
	}
	sort.Slice(sibs, func(i, j int) bool { return sibs[i].CreateIndex < sibs[j].CreateIndex })
	i := slices.IndexFunc(sibs, func(n *api.Node) bool { return n.Path == path })
	me := fc.nodes[path]
	for j := i - 1; j >= 0; j-- {
		if me.Lock == api.LockExclusive || sibs[j].Lock == api.LockExclusive {
			return api.Base(sibs[j].Path)
		}
	}
	return ""
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	_ = ln.Close()
	return a
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", strings.TrimSpace(string(b)), err)
	}
	return v
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
