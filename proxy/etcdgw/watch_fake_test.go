package etcdgw

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// wfBackend is a fake Backend for the watch and election tests: two
// prefixes, /demo and /other, on cells c1 and c2; nodes in a map, the
// change ring in a slice with a Floor; tokens granted read on one
// prefix each ("" reads everything).
type wfBackend struct {
	mu      sync.Mutex
	changed chan struct{} // closed at every change (long polls wait on it)
	epoch   uint64
	index   uint64
	floor   uint64
	ring    []api.Change
	nodes   map[string]api.Node
	grants  map[string]string // token -> the prefix it may read ("*": all)
	reads   int               // RouteChanges calls
	denyAll bool              // every Call refused forbidden
}

func newWFBackend() *wfBackend {
	return &wfBackend{changed: make(chan struct{}), epoch: 3, index: 10, floor: 1, nodes: map[string]api.Node{},
		grants: map[string]string{"": "*", "alice": "/demo", "bob": "/other"}}
}

type wfCaller struct{ tok string }

func (c wfCaller) Tenant() string                   { return c.tok }
func (c wfCaller) Digest() string                   { return c.tok }
func (c wfCaller) Allows(_ api.Role, _ string) bool { return true }

func (b *wfBackend) Authorize(_ context.Context, tok string) (Caller, error) {
	if _, ok := b.grants[tok]; !ok {
		return nil, &api.Error{Code: api.CodeUnauthorized, Message: "unknown token"}
	}
	return wfCaller{tok: tok}, nil
}

func (b *wfBackend) Prefix(path string) (PrefixInfo, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range []string{"/demo", "/other"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			cell := "c1"
			if p == "/other" {
				cell = "c2"
			}
			return PrefixInfo{Prefix: p, Cell: cell, Epoch: b.epoch}, true
		}
	}
	return PrefixInfo{}, false
}

func (b *wfBackend) Prefixes() []string                                         { return []string{"/demo", "/other"} }
func (b *wfBackend) Proxies() []api.ProxyInfo                                   { return nil }
func (b *wfBackend) PeerEtcdURL(context.Context, api.ProxyInfo) (string, error) { return "", nil }
func (b *wfBackend) Name() string                                               { return "wf" }

func (b *wfBackend) Call(ctx context.Context, tok, route string, req, resp any) error {
	b.mu.Lock()
	g, ok := b.grants[tok]
	deny := b.denyAll
	b.mu.Unlock()
	if route != api.RouteRange {
		return &api.Error{Code: api.CodeBadRequest, Message: "fake: only ranges"}
	}
	r := req.(*api.RangeRequest)
	if !ok || deny || (g != "*" && r.Root != g && !strings.HasPrefix(r.Root, g+"/")) {
		return &api.Error{Code: api.CodeForbidden, Message: "no read on " + r.Root}
	}
	return b.CallOwn(ctx, route, req, resp)
}

func (b *wfBackend) CallOwn(ctx context.Context, route string, req, resp any) error {
	switch route {
	case api.RouteRange:
		*resp.(*api.RangeResponse) = b.rangeOf(req.(*api.RangeRequest))
		return nil
	case api.RouteChanges:
		return b.changesOf(ctx, req.(*api.ChangesRequest), resp.(*api.ChangesResponse))
	}
	return &api.Error{Code: api.CodeBadRequest, Message: "fake: no route " + route}
}

func (b *wfBackend) rangeOf(r *api.RangeRequest) api.RangeResponse {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := api.RangeResponse{Index: b.index, Epoch: b.epoch}
	for p, n := range b.nodes {
		if inSpan(p, r.Start, r.End) && !(r.SkipContainers && n.Container) {
			out.Count++
			if !r.CountOnly {
				out.Nodes = append(out.Nodes, n)
			}
		}
	}
	return out
}

func (b *wfBackend) changesOf(ctx context.Context, r *api.ChangesRequest, out *api.ChangesResponse) error {
	wait := time.Duration(r.WaitMS) * time.Millisecond
	deadline := time.Now().Add(wait)
	for i := 0; ; i++ {
		b.mu.Lock()
		b.reads++
		*out = api.ChangesResponse{Floor: b.floor, Index: b.index, Epoch: b.epoch}
		limit := api.MaxChangesPerRead
		if r.Limit > 0 {
			limit = r.Limit
		}
		for _, c := range b.ring {
			if c.Index >= r.From && (c.Node.Path == r.Root || strings.HasPrefix(c.Node.Path, r.Root+"/")) {
				if n := len(out.Changes); n >= limit && c.Index != out.Changes[n-1].Index {
					out.More = true // as the cell: never cut an index
					break
				}
				out.Changes = append(out.Changes, c)
			}
		}
		ch := b.changed
		b.mu.Unlock()
		if len(out.Changes) > 0 || r.From < out.Floor || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-time.After(time.Until(deadline)):
		}
	}
}

// apply records one change at the next index.
func (b *wfBackend) apply(kind api.ChangeKind, n api.Node) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.index++
	switch kind {
	case api.ChangePut:
		old, ok := b.nodes[n.Path]
		n.CreateIndex, n.Version = b.index, 1
		if ok {
			n.CreateIndex, n.Version = old.CreateIndex, old.Version+1
		}
		n.ModifyIndex = b.index
		b.nodes[n.Path] = n
	case api.ChangeDelete:
		n = b.nodes[n.Path]
		delete(b.nodes, n.Path)
	}
	b.ring = append(b.ring, api.Change{Index: b.index, Kind: kind, Node: n})
	close(b.changed)
	b.changed = make(chan struct{})
	return b.index
}

func (b *wfBackend) put(path, value string) uint64 {
	return b.apply(api.ChangePut, api.Node{Path: path, Value: []byte(value)})
}

func (b *wfBackend) del(path string) uint64 {
	return b.apply(api.ChangeDelete, api.Node{Path: path})
}

// setFloor drops the ring below floor.
func (b *wfBackend) setFloor(floor uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.floor = floor
	kept := b.ring[:0]
	for _, c := range b.ring {
		if c.Index >= floor {
			kept = append(kept, c)
		}
	}
	b.ring = kept
}

// wfGateway starts a gateway on b and a client with token tok ("": none).
func wfGateway(t *testing.T, b *wfBackend, tok string) (*Gateway, *clientv3.Client) {
	t.Helper()
	g, err := Start(context.Background(), Config{Listen: "127.0.0.1:0", DefaultPrefix: "/demo/etcd"}, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	cfg := clientv3.Config{Endpoints: []string{g.Addr()}, DialTimeout: 5 * time.Second}
	if tok != "" {
		cfg.Username, cfg.Password = "u", tok
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return g, c
}

// wfWithin bounds how long a test waits for one answer.
const wfWithin = 10 * time.Second

// wfRecv is the next answer on wc (fails the test after wfWithin).
func wfRecv(t *testing.T, wc clientv3.WatchChan) clientv3.WatchResponse {
	t.Helper()
	select {
	case r, ok := <-wc:
		if !ok {
			return clientv3.WatchResponse{Canceled: true}
		}
		return r
	case <-time.After(wfWithin):
		t.Fatal("no watch answer")
	}
	return clientv3.WatchResponse{}
}
