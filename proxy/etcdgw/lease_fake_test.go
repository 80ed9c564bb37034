package etcdgw

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lfBackend is a fake Backend for the lease and Lock tests: a cell per
// prefix (/demo on c1, /other on c2) with sessions, ephemeral and lock
// nodes; every token is its own tenant and credential; requests and
// answers go through JSON as on the wire.
type lfBackend struct {
	mu       sync.Mutex
	index    uint64
	sessions map[uint64]*lfSession
	nodes    map[string]api.Node
	seq      map[string]int
	ageMS    int64 // LeaseAgeMS answered to KeepAlives
	kas      int   // KeepAlives received
	opens    int
	closes   int
	onKA     func() // called at each KeepAlive (a test's clock moves)
	delayed  int    // lock re-checks still in a lock-delay
	// lostCreates: the next creates apply but answer an error of
	// unknown outcome (the connection cut after the cell applied them).
	lostCreates int
	// created dedupes creates by (session, request id), as a cell does.
	created map[[2]uint64]api.CreateResponse
}

type lfSession struct {
	cell, secret string
	leaseMS      int64
	ended        bool
}

func newLFBackend() *lfBackend {
	return &lfBackend{index: 100, sessions: map[uint64]*lfSession{}, nodes: map[string]api.Node{}, seq: map[string]int{}}
}

type lfCaller struct{ tok string }

func (c lfCaller) Tenant() string { return c.tok }
func (c lfCaller) Digest() string { return "digest-" + c.tok }

// Allows: token "sub" reads only /demo/sub (and is refused ranges of
// /demo itself); every other token reads all.
func (c lfCaller) Allows(_ api.Role, path string) bool {
	return c.tok != "sub" || strings.HasPrefix(path, "/demo/sub/")
}

func (b *lfBackend) Authorize(_ context.Context, tok string) (Caller, error) {
	return lfCaller{tok: tok}, nil
}

func (b *lfBackend) Prefix(path string) (PrefixInfo, bool) {
	for _, p := range []string{"/demo", "/other"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return PrefixInfo{Prefix: p, Cell: map[string]string{"/demo": "c1", "/other": "c2"}[p], Epoch: 2}, true
		}
	}
	return PrefixInfo{}, false
}

func (b *lfBackend) Prefixes() []string                                         { return []string{"/demo", "/other"} }
func (b *lfBackend) Proxies() []api.ProxyInfo                                   { return nil }
func (b *lfBackend) PeerEtcdURL(context.Context, api.ProxyInfo) (string, error) { return "", nil }
func (b *lfBackend) Name() string                                               { return "lf" }

func (b *lfBackend) CallOwn(ctx context.Context, route string, req, resp any) error {
	if route == api.RouteChanges {
		return &api.Error{Code: api.CodeUnavailable, Message: "fake: no change ring"}
	}
	return b.Call(ctx, "", route, req, resp)
}

// via copies v into out through JSON.
func via(v, out any) {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		panic(err)
	}
}

func (b *lfBackend) Call(_ context.Context, tok, route string, req, resp any) error {
	if tok == "sub" && route == api.RouteRange {
		return &api.Error{Code: api.CodeForbidden, Message: "tenant sub has no read role on /demo"}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out any
	var err error
	switch route {
	case api.RouteSessionOpen:
		var r api.OpenSessionRequest
		via(req, &r)
		out = b.open(r)
	case api.RouteSessionKeepAlive:
		var r api.KeepAliveRequest
		via(req, &r)
		out, err = b.keepAlive(r)
	case api.RouteSessionClose:
		var r api.CloseSessionRequest
		via(req, &r)
		out, err = struct{}{}, b.closeSession(r.Session)
	case api.RouteCreate:
		var r api.CreateRequest
		via(req, &r)
		key := [2]uint64{r.Session, r.Request}
		cr, seen := b.created[key]
		if !seen || r.Request == 0 {
			cr, err = b.create(r)
		}
		if err == nil && r.Request != 0 {
			if b.created == nil {
				b.created = map[[2]uint64]api.CreateResponse{}
			}
			b.created[key] = cr
		}
		if err == nil && b.lostCreates > 0 {
			b.lostCreates--
			return fmt.Errorf("fake: the connection was cut after create %s applied: outcome unknown", cr.Node.Path)
		}
		out = cr
	case api.RouteLockState:
		var r api.LockStateRequest
		via(req, &r)
		out = b.lockState(r)
	case api.RouteDelete:
		var r api.DeleteRequest
		via(req, &r)
		if n, ok := b.nodes[r.Path]; ok && n.Ephemeral && (n.Owner != r.Session || b.sessions[n.Owner].secret != r.Secret) {
			return &api.Error{Code: api.CodeForbidden, Message: "only the owning session may change " + r.Path}
		}
		out, err = b.del(r.Path)
	case api.RouteGet:
		var r api.ReadRequest
		via(req, &r)
		n, ok := b.nodes[r.Path]
		if !ok {
			return &api.Error{Code: api.CodeNoNode, Message: r.Path}
		}
		out = api.GetResponse{Exists: true, Node: n, Index: b.index}
	case api.RouteRange:
		var r api.RangeRequest
		via(req, &r)
		out = b.rangeOf(r)
	default:
		return &api.Error{Code: api.CodeBadRequest, Message: "fake: no route " + route}
	}
	if err != nil {
		return err
	}
	via(out, resp)
	return nil
}

func (b *lfBackend) open(r api.OpenSessionRequest) api.SessionResponse {
	b.index++
	b.opens++
	b.sessions[b.index] = &lfSession{cell: r.Cell, secret: fmt.Sprint("s", b.index), leaseMS: r.LeaseMS}
	return api.SessionResponse{Session: b.index, Secret: fmt.Sprint("s", b.index), LeaseMS: r.LeaseMS, Index: b.index}
}

func (b *lfBackend) keepAlive(r api.KeepAliveRequest) (api.SessionResponse, error) {
	s := b.sessions[r.Session]
	if s == nil || s.secret != r.Secret {
		return api.SessionResponse{}, &api.Error{Code: api.CodeNoSession, Message: "no session"}
	}
	if s.ended {
		return api.SessionResponse{}, api.ErrSessionExpired
	}
	b.kas++
	if b.onKA != nil {
		b.onKA()
	}
	return api.SessionResponse{Session: r.Session, LeaseMS: s.leaseMS, LeaseAgeMS: b.ageMS, Index: b.index}, nil
}

// closeSession ends a session and deletes its ephemeral nodes.
func (b *lfBackend) closeSession(id uint64) error {
	s := b.sessions[id]
	if s == nil || s.ended {
		return api.ErrSessionExpired
	}
	b.closes++
	s.ended = true
	b.index++
	for p, n := range b.nodes {
		if n.Ephemeral && n.Owner == id {
			delete(b.nodes, p)
		}
	}
	return nil
}

func (b *lfBackend) create(r api.CreateRequest) (api.CreateResponse, error) {
	if s := b.sessions[r.Session]; r.Ephemeral && (s == nil || s.ended || s.secret != r.Secret) {
		return api.CreateResponse{}, api.ErrSessionExpired
	}
	b.index++
	path := r.Path
	if r.Sequential {
		parent := path[:strings.LastIndex(path, "/")]
		b.seq[parent]++
		path = fmt.Sprintf("%s%010d", path, b.seq[parent])
	}
	n := api.Node{Path: path, Value: r.Value, Version: 1, CreateIndex: b.index, ModifyIndex: b.index, Ephemeral: r.Ephemeral, Lock: r.Lock}
	if r.Ephemeral {
		n.Owner = r.Session
	}
	b.nodes[path] = n
	resp := api.CreateResponse{Node: n, Index: b.index}
	if r.Lock != api.LockNone {
		resp.WaitFor = b.waitForLocked(path)
		if resp.WaitFor == "" && b.delayed > 0 {
			resp.WaitFor = path[:strings.LastIndex(path, "/")] // fsm waitOn: the directory
		}
		resp.Token = api.MakeToken(2, n.CreateIndex)
	}
	return resp, nil
}

// waitForLocked is the lock sibling just before path, "" if none.
func (b *lfBackend) waitForLocked(path string) string {
	parent := path[:strings.LastIndex(path, "/")+1]
	var sibs []string
	for p, n := range b.nodes {
		if n.Lock != api.LockNone && strings.HasPrefix(p, parent) && !strings.Contains(p[len(parent):], "/") {
			sibs = append(sibs, p)
		}
	}
	sort.Strings(sibs)
	i := sort.SearchStrings(sibs, path)
	if i == 0 {
		return ""
	}
	return sibs[i-1]
}

func (b *lfBackend) lockState(r api.LockStateRequest) api.LockStateResponse {
	n, ok := b.nodes[r.Path]
	if !ok {
		return api.LockStateResponse{Index: b.index}
	}
	w := b.waitForLocked(r.Path)
	if w == "" && b.delayed > 0 {
		b.delayed--
		dir := r.Path[:strings.LastIndex(r.Path, "/")]
		return api.LockStateResponse{Exists: true, WaitFor: dir, Delay: &api.LockDelayInfo{MS: 100}, Index: b.index}
	}
	return api.LockStateResponse{Exists: true, Held: w == "", WaitFor: w, Token: api.MakeToken(2, n.CreateIndex), Index: b.index}
}

func (b *lfBackend) del(path string) (api.WriteResponse, error) {
	n, ok := b.nodes[path]
	if !ok {
		return api.WriteResponse{}, &api.Error{Code: api.CodeNoNode, Message: path}
	}
	b.index++
	delete(b.nodes, path)
	return api.WriteResponse{Node: n, Index: b.index}, nil
}

func (b *lfBackend) rangeOf(r api.RangeRequest) api.RangeResponse {
	out := api.RangeResponse{Index: b.index, Epoch: 2}
	var paths []string
	for p := range b.nodes {
		if p == r.Start || (r.End != "" && p >= r.Start && p < r.End) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		out.Nodes = append(out.Nodes, b.nodes[p])
	}
	out.Count = len(out.Nodes)
	return out
}

// nodeCount is the number of nodes.
func (b *lfBackend) nodeCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.nodes)
}

// lfGateway starts a gateway on b and a client for each token.
func lfGateway(t *testing.T, b *lfBackend, toks ...string) (*Gateway, []*clientv3.Client) {
	t.Helper()
	g, err := Start(context.Background(), Config{Listen: "127.0.0.1:0", DefaultPrefix: "/demo/etcd"}, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	var cs []*clientv3.Client
	for _, tok := range toks {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{g.Addr()}, DialTimeout: 5 * time.Second, Username: "u", Password: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cs = append(cs, c)
	}
	return g, cs
}
