package etcdgw

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// coreBackend is a fake proxy for the core's tests: one node tree over
// three prefixes (/etcd, /demo, /other), tokens "admin" (everything)
// and "t1" (read and write on /etcd only), and the routes KV and Txn
// use (range, put, create, delete, txn) with the cell's semantics the
// gateway relies on: versions, containers, pins and compares.
type coreBackend struct {
	mu    sync.Mutex
	nodes map[string]api.Node
	index uint64
	calls []string // tokens of the calls, in order
	// afterRange, if set, runs after each RouteRange call (b.mu held):
	// a write landing between two reads.
	afterRange func(r api.RangeRequest)
	// maxRanges, if set, refuses a RouteRanges read of more reads
	// (limit_exceeded, as the cell past its bounds); ranges counts them.
	maxRanges int
	ranges    []int
	// routes are the calls' routes, in order; oldLockd answers a
	// transaction as a lockd before its epoch and branch reads did.
	routes   []string
	oldLockd bool
}

func newCoreBackend() *coreBackend { return &coreBackend{nodes: map[string]api.Node{}, index: 10} }

type coreCaller struct{ tok string }

func (c coreCaller) Tenant() string { return c.tok }
func (c coreCaller) Digest() string { return "d-" + c.tok }
func (c coreCaller) Allows(_ api.Role, path string) bool {
	return c.tok == "admin" || c.tok == "" || path == "/etcd" || strings.HasPrefix(path, "/etcd/")
}

func (b *coreBackend) Authorize(_ context.Context, tok string) (Caller, error) {
	switch tok {
	case "admin", "t1", "":
		return coreCaller{tok}, nil
	}
	return nil, api.Errorf(api.CodeUnauthorized, "unknown token")
}

var corePrefixes = map[string]PrefixInfo{
	"/etcd":  {Prefix: "/etcd", Cell: "c1", Epoch: 1},
	"/demo":  {Prefix: "/demo", Cell: "c2", Epoch: 2},
	"/other": {Prefix: "/other", Cell: "c3", Epoch: 1},
}

func (b *coreBackend) Prefix(path string) (PrefixInfo, bool) {
	if api.ValidatePath(path) != nil {
		return PrefixInfo{}, false
	}
	p, ok := corePrefixes[api.Prefix(path)]
	return p, ok
}
func (b *coreBackend) Prefixes() []string                                         { return []string{"/demo", "/etcd", "/other"} }
func (b *coreBackend) Proxies() []api.ProxyInfo                                   { return nil }
func (b *coreBackend) PeerEtcdURL(context.Context, api.ProxyInfo) (string, error) { return "", nil }
func (b *coreBackend) Name() string                                               { return "core" }
func (b *coreBackend) CallOwn(ctx context.Context, route string, req, resp any) error {
	return b.Call(ctx, "admin", route, req, resp)
}

func (b *coreBackend) Call(ctx context.Context, tok, route string, req, resp any) error {
	c, err := b.Authorize(ctx, tok)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls, b.routes = append(b.calls, tok), append(b.routes, route)
	var out any
	switch route {
	case api.RouteRange:
		var r api.RangeRequest
		via(req, &r)
		if !c.Allows(api.RoleRead, r.Root) {
			return api.Errorf(api.CodeForbidden, "no read on %s", r.Root)
		}
		out = b.rangeOf(r)
		if b.afterRange != nil {
			b.afterRange(r)
		}
	case api.RouteRanges: // every read at one index: the fake holds its lock throughout
		var r api.RangesRequest
		via(req, &r)
		b.ranges = append(b.ranges, len(r.Reads))
		if b.maxRanges > 0 && len(r.Reads) > b.maxRanges {
			return api.Errorf(api.CodeLimitExceeded, "%d ranges read together: more than the fake's %d", len(r.Reads), b.maxRanges)
		}
		resp := api.RangesResponse{}
		for _, rr := range r.Reads {
			if !c.Allows(api.RoleRead, rr.Root) {
				return api.Errorf(api.CodeForbidden, "no read on %s", rr.Root)
			}
			one := b.rangeOf(rr)
			resp.Reads, resp.Index, resp.Epoch = append(resp.Reads, one), one.Index, one.Epoch
		}
		out = resp
	case api.RoutePut, api.RouteCreate, api.RouteDelete, api.RouteTxn:
		t, err := b.asTxn(route, req)
		if err != nil {
			return err
		}
		for _, p := range t.Paths() {
			if !c.Allows(api.RoleWrite, p) {
				return api.Errorf(api.CodeForbidden, "no write on %s", p)
			}
		}
		if err := b.checkTxnReads(c, t.Reads); err != nil {
			return err
		}
		tr, err := b.txn(t)
		if err != nil || route == api.RouteTxn {
			b.answerTxnReads(t, &tr)
			out = tr
			break
		}
		if !tr.Succeeded {
			return &api.Error{Code: tr.Failed.Code, Message: tr.Failed.Message}
		}
		out = api.WriteResponse{Node: tr.Nodes[0], Index: tr.Index}
		if route == api.RouteCreate {
			out = api.CreateResponse{Node: tr.Nodes[0], Index: tr.Index}
		}
	default:
		return api.Errorf(api.CodeBadRequest, "fake: no route %s", route)
	}
	via(out, resp)
	return nil
}

// checkTxnReads refuses a transaction whose branch reads c may not make,
// as a lockd does before proposing it.
func (b *coreBackend) checkTxnReads(c Caller, r *api.TxnReads) error {
	if r == nil || b.oldLockd {
		return nil
	}
	for _, rr := range append(slices.Clone(r.Then), r.Else...) {
		if !c.Allows(api.RoleRead, rr.Root) {
			return api.Errorf(api.CodeForbidden, "no read on %s", rr.Root)
		}
	}
	return nil
}

// answerTxnReads gives tr the prefix's epoch and its branch's reads, as a
// lockd does (none past maxRanges: a lockd omits an answer past its
// bounds); nothing for oldLockd.
func (b *coreBackend) answerTxnReads(t api.TxnRequest, tr *api.TxnResponse) {
	if b.oldLockd || len(t.Then) == 0 {
		return
	}
	tr.Epoch = corePrefixes[api.Prefix(t.Then[0].Path)].Epoch
	reads := []api.RangeRequest(nil)
	switch {
	case t.Reads == nil:
	case tr.Succeeded:
		reads = t.Reads.Then
	case tr.Failed != nil && tr.Failed.Kind == api.TxnFailedIf:
		reads = t.Reads.Else
	}
	if len(reads) == 0 || b.maxRanges > 0 && len(reads) > b.maxRanges {
		return
	}
	tr.Reads = &api.RangesResponse{Index: b.index, Epoch: tr.Epoch}
	for _, rr := range reads {
		tr.Reads.Reads = append(tr.Reads.Reads, b.rangeOf(rr))
	}
}

// asTxn is a single write as a transaction of one op.
func (b *coreBackend) asTxn(route string, req any) (api.TxnRequest, error) {
	var t api.TxnRequest
	switch route {
	case api.RouteTxn:
		via(req, &t)
	case api.RoutePut:
		var r api.PutRequest
		via(req, &r)
		t.Then = []api.TxnOp{{Op: api.TxnPut, Path: r.Path, Value: r.Value, Version: r.Version, MakeParents: r.MakeParents, Container: r.Container, Uncontain: r.Uncontain}}
	case api.RouteCreate:
		var r api.CreateRequest
		via(req, &r)
		t.WriteHeader = r.WriteHeader
		t.Then = []api.TxnOp{{Op: api.TxnCreate, Path: r.Path, Value: r.Value, Ephemeral: r.Ephemeral, MakeParents: r.MakeParents, Container: r.Container}}
	case api.RouteDelete:
		var r api.DeleteRequest
		via(req, &r)
		t.Then = []api.TxnOp{{Op: api.TxnDelete, Path: r.Path, Version: r.Version}}
	}
	return t, nil
}

func (b *coreBackend) rangeOf(r api.RangeRequest) api.RangeResponse {
	var paths []string
	for p, n := range b.nodes {
		in := p == r.Start
		if r.End != "" {
			in = p >= r.Start && p < r.End
		}
		if in && (p == r.Root || strings.HasPrefix(p, r.Root+"/")) && !(r.SkipContainers && n.Container) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	out := api.RangeResponse{Count: len(paths), Index: b.index, Epoch: corePrefixes[api.Prefix(r.Start)].Epoch}
	limit := r.Limit
	if limit == 0 || limit > api.MaxRangeKeys {
		limit = api.MaxRangeKeys
	}
	if r.CountOnly {
		return out
	}
	for i, p := range paths {
		if i == limit {
			out.More = true
			break
		}
		n := b.nodes[p]
		if r.KeysOnly {
			n.Value = nil
		}
		out.Nodes = append(out.Nodes, n)
	}
	return out
}

// txn applies t all or nothing (conditions on the state before it).
func (b *coreBackend) txn(t api.TxnRequest) (api.TxnResponse, error) {
	for i, c := range t.If {
		if !b.holds(c) {
			return api.TxnResponse{Failed: &api.TxnFailure{Kind: api.TxnFailedIf, Index: i, Code: api.CodeConditionFailed}}, nil
		}
	}
	saved := make(map[string]api.Node, len(b.nodes))
	for k, v := range b.nodes {
		saved[k] = v
	}
	b.index++
	var nodes []api.Node
	for i, o := range t.Then {
		n, code := b.apply(o, t.Session)
		if code != "" {
			b.nodes, b.index = saved, b.index-1
			return api.TxnResponse{Failed: &api.TxnFailure{Kind: api.TxnFailedThen, Index: i, Code: code, Message: o.Path}}, nil
		}
		nodes = append(nodes, n)
	}
	return api.TxnResponse{Succeeded: true, Index: b.index, Nodes: nodes}, nil
}

func (b *coreBackend) holds(c api.TxnCond) bool {
	n, ok := b.nodes[c.Path]
	if ok && n.Container && c.If.IsCompare() {
		n, ok = api.Node{}, false // a container is not a key: the compares take it for missing
	}
	ep := corePrefixes[api.Prefix(c.Path)].Epoch
	tok := func(i uint64) uint64 { return uint64(rev(ep, i)) }
	num := func(have, want uint64) bool {
		switch c.Cmp {
		case api.CmpEqual:
			return have == want
		case api.CmpNotEqual:
			return have != want
		case api.CmpLess:
			return have < want
		case api.CmpGreater:
			return have > want
		}
		return false
	}
	switch c.If {
	case api.CondMissing:
		return !ok
	case api.CondExists:
		return ok
	case api.CondVersion:
		return ok && n.Version == c.Version
	case api.CondVersionCmp:
		return num(n.Version, c.Version)
	case api.CondCreateRev:
		return num(tok(n.CreateIndex), c.Rev)
	case api.CondModRev:
		return num(tok(n.ModifyIndex), c.Rev)
	case api.CondOwner:
		return num(n.Owner, c.Owner)
	case api.CondValue:
		if !ok {
			return false
		}
		d := bytes.Compare(n.Value, c.Value)
		return num(uint64(d+1), 1)
	}
	return false
}

func (b *coreBackend) apply(o api.TxnOp, session uint64) (api.Node, api.Code) {
	n, ok := b.nodes[o.Path]
	switch o.Op {
	case api.TxnDelete:
		if !ok {
			return api.Node{}, api.CodeNoNode
		}
		if o.Version != nil && *o.Version != n.Version {
			return api.Node{}, api.CodeVersionMismatch
		}
		if n.NumChildren > 0 {
			return api.Node{}, api.CodeNotEmpty
		}
		b.remove(o.Path)
		return n, ""
	case api.TxnCreate, api.TxnPut:
		if o.Version != nil && ((*o.Version == 0) == ok || (ok && *o.Version != n.Version)) {
			return api.Node{}, api.CodeVersionMismatch
		}
		if ok && o.Op == api.TxnCreate {
			return api.Node{}, api.CodeNodeExists
		}
		if ok {
			n.Value, n.Version, n.ModifyIndex = o.Value, n.Version+1, b.index
			if o.Uncontain && n.Container {
				n.Container, n.Version, n.CreateIndex = false, 1, b.index
			}
			b.nodes[o.Path] = n
			return n, ""
		}
		if !b.parents(o.Path, o.MakeParents, o.Container) {
			return api.Node{}, api.CodeNoNode
		}
		n = api.Node{Path: o.Path, Value: o.Value, Version: 1, CreateIndex: b.index, ModifyIndex: b.index, Ephemeral: o.Ephemeral}
		if o.Ephemeral {
			n.Owner = session
		}
		b.nodes[o.Path] = n
		return n, ""
	}
	return api.Node{}, api.CodeBadRequest
}

// parents makes (or finds) p's parents and counts p as their child.
func (b *coreBackend) parents(p string, make, container bool) bool {
	par := api.Parent(p)
	if par == "/" {
		return true
	}
	n, ok := b.nodes[par]
	if !ok {
		if !make || !b.parents(par, make, container) {
			return false
		}
		n = api.Node{Path: par, Version: 1, CreateIndex: b.index, ModifyIndex: b.index, Container: container}
	}
	n.NumChildren++
	b.nodes[par] = n
	return true
}

// remove deletes p, and its container parents it leaves empty.
func (b *coreBackend) remove(p string) {
	delete(b.nodes, p)
	par := api.Parent(p)
	n, ok := b.nodes[par]
	if !ok {
		return
	}
	n.NumChildren--
	b.nodes[par] = n
	if n.Container && n.NumChildren == 0 {
		b.remove(par)
	}
}

// coreGateway starts a gateway on b and a client for each token ("" for
// none).
func coreGateway(t *testing.T, b *coreBackend, cfg Config, toks ...string) (*Gateway, []*clientv3.Client) {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	if cfg.DefaultPrefix == "" {
		cfg.DefaultPrefix = "/etcd"
	}
	g, err := Start(context.Background(), cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	var cs []*clientv3.Client
	for _, tok := range toks {
		cc := clientv3.Config{Endpoints: []string{g.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
		if tok != "" {
			cc.Username, cc.Password = "u", tok
		}
		c, err := clientv3.New(cc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cs = append(cs, c)
	}
	return g, cs
}
