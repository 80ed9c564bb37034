package ctl

// The cluster side of lockctl's admin commands, faked for the JSON shape
// test (jsonshape_test.go): the fake cell (tests/fake) serves one cell and
// no admin route, so a hook on it answers the directory and the admin
// routes from a small directory kept here: the cells demo (the fake's own),
// payments and cell3, six lockds, a proxy and a tenant. Every cell's
// endpoint is the fake's address, so whatever lockctl sends reaches it.
// It answers as lockd does, with the same types, and checks nothing.

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/tests/fake"
)

// adminFake is the directory behind the hook.
type adminFake struct {
	addr string

	mu  sync.Mutex
	dir api.DirectoryResponse
}

// dirResult is a directory command's reply (the SDK's directoryResult).
type dirResult struct {
	Index  uint64          `json:"index"`
	Cell   *api.CellInfo   `json:"cell,omitempty"`
	Prefix *api.PrefixInfo `json:"prefix,omitempty"`
}

// newAdminFake installs the admin hook on f.
func newAdminFake(f *fakeServer) *adminFake {
	a := &adminFake{addr: f.addr, dir: initialDirectory(f.addr)}
	routes := a.routes()
	f.SetHook(func(_ int, route string, body []byte, next func() (int, any)) (int, any) {
		h, ok := routes[route]
		if !ok {
			return next() // the fake's own, without a.mu: a KeepAlive waits there
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		return encoded(h(body))
	})
	return a
}

// encoded is a reply encoded now, under a.mu: the fake encodes it later,
// when the directory may have changed again.
func encoded(status int, v any) (int, any) {
	if _, isErr := v.(*api.Error); isErr {
		return status, v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fake.Fail(api.CodeInternal, "%v", err)
	}
	return status, json.RawMessage(b)
}

func (a *adminFake) routes() map[string]func([]byte) (int, any) {
	return map[string]func([]byte) (int, any){
		api.RouteDirectory:         a.directory,
		api.RouteAdminBackup:       a.backup,
		api.RouteAdminCellCreate:   a.createCell,
		api.RouteAdminPrefixAssign: a.assignPrefix,
		api.RouteAdminRestore:      a.restore,
		api.RouteAdminMember:       a.member,
		api.RouteAdminMigrate:      a.migrate,
		api.RouteAdminPrefixOp:     a.prefixOp,
		api.RouteAdminTenant:       a.tenant,
		api.RouteAdminTenants:      a.tenants,
	}
}

func initialDirectory(addr string) api.DirectoryResponse {
	replicas := func(lockds ...uint64) []api.ReplicaInfo {
		var out []api.ReplicaInfo
		for i, l := range lockds {
			out = append(out, api.ReplicaInfo{ReplicaID: uint64(i + 1), Lockd: l, APIAddr: addr, Zone: zoneOf(l), Initial: true})
		}
		return out
	}
	cell := func(name string, shard uint64, prefix string) api.CellInfo {
		return api.CellInfo{Name: name, ShardID: shard, Prefixes: []string{prefix}, Endpoints: []string{addr}, Replicas: replicas(1, 2, 3)}
	}
	d := api.DirectoryResponse{
		Index:     18,
		Cells:     []api.CellInfo{cell("cell3", 3, "/cell3"), cell("demo", 1, "/demo"), cell("payments", 2, "/payments")},
		Prefixes:  []api.PrefixInfo{{Prefix: "/cell3", Cell: "cell3", Epoch: 1}, {Prefix: "/demo", Cell: "demo", Epoch: 1}, {Prefix: "/payments", Cell: "payments", Epoch: 2}},
		Directory: api.CellInfo{Name: "directory", ShardID: directory.ShardID, Endpoints: []string{addr}, Replicas: replicas(1, 2, 3)},
		Proxies:   []api.ProxyInfo{{Name: "proxy-1", APIAddr: addr, Zone: "z1"}},
		Tenants: []api.Tenant{{Name: "payments", Grants: []api.Grant{{Prefix: "/payments", Roles: []api.Role{api.RoleWrite, api.RoleLock}}},
			Quota: api.Quota{Nodes: 50000}, Tokens: []string{api.TokenDigest("lkd_example")}}},
		LogCodec: 3,
	}
	d.Cells[2].Timing = &api.CellTiming{HeartbeatMS: 500, ElectionMS: 5000, LeaseMS: 30000, KeepAliveMS: 10000, GraceMS: 120000}
	for id := uint64(1); id <= 6; id++ {
		d.Lockds = append(d.Lockds, api.LockdInfo{ID: id, RaftAddr: fmt.Sprintf("127.0.0.1:%d", 7100+id), APIAddr: addr, Zone: zoneOf(id), LogCodec: 3})
	}
	return d
}

func zoneOf(lockd uint64) string { return fmt.Sprintf("z%d", (lockd-1)%3+1) }

// decode reads body into a T, or answers bad_request.
func decode[T any](body []byte) (T, *api.Error) {
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return v, api.Errorf(api.CodeBadRequest, "malformed JSON body: %v", err)
	}
	return v, nil
}

func refused(e *api.Error) (int, any) { return e.Code.HTTPStatus(), e }

func (a *adminFake) directory([]byte) (int, any) { return 200, a.dir }

func (a *adminFake) cell(name string) *api.CellInfo {
	for i := range a.dir.Cells {
		if a.dir.Cells[i].Name == name {
			return &a.dir.Cells[i]
		}
	}
	return nil
}

func (a *adminFake) prefix(p string) *api.PrefixInfo {
	for i := range a.dir.Prefixes {
		if a.dir.Prefixes[i].Prefix == p {
			return &a.dir.Prefixes[i]
		}
	}
	return nil
}

// changed records a directory change: its index, and a reply carrying it.
func (a *adminFake) changed(c *api.CellInfo, p *api.PrefixInfo) (int, any) {
	a.dir.Index++
	return 200, dirResult{Index: a.dir.Index, Cell: c, Prefix: p}
}

func (a *adminFake) backup(body []byte) (int, any) {
	req, e := decode[api.BackupRequest](body)
	if e != nil {
		return refused(e)
	}
	return 200, api.BackupResponse{
		SnapshotResponse: api.SnapshotResponse{Cell: req.Cell, ReplicaID: 2, Index: 812345, Bytes: 18734112,
			SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", SaveMS: 412.6, FreezeMS: 3.2},
		Location: "/var/backups/lockd/" + req.Cell + "/00000000000000812345",
	}
}

func (a *adminFake) createCell(body []byte) (int, any) {
	req, e := decode[api.CreateCellRequest](body)
	if e != nil {
		return refused(e)
	}
	if a.cell(req.Name) != nil {
		return fake.Fail(api.CodeConflict, "cell %s exists", req.Name)
	}
	on := req.On
	if len(on) == 0 {
		on = []uint64{1, 2, 3, 4, 5}[:max(req.Replicas, 3)]
	}
	c := api.CellInfo{Name: req.Name, ShardID: uint64(len(a.dir.Cells) + 1), Prefixes: []string{}, Timing: req.Timing}
	for i, l := range on {
		c.Endpoints = append(c.Endpoints, a.addr)
		c.Replicas = append(c.Replicas, api.ReplicaInfo{ReplicaID: uint64(i + 1), Lockd: l, APIAddr: a.addr, Zone: zoneOf(l), Initial: true})
	}
	a.dir.Cells = append(a.dir.Cells, c)
	return a.changed(&c, nil)
}

func (a *adminFake) assignPrefix(body []byte) (int, any) {
	req, e := decode[api.AssignPrefixRequest](body)
	if e != nil {
		return refused(e)
	}
	c := a.cell(req.Cell)
	if c == nil || a.prefix(req.Prefix) != nil {
		return fake.Fail(api.CodeConflict, "cannot assign %s to %s", req.Prefix, req.Cell)
	}
	c.Prefixes = append(c.Prefixes, req.Prefix)
	a.dir.Prefixes = append(a.dir.Prefixes, api.PrefixInfo{Prefix: req.Prefix, Cell: req.Cell, Epoch: 1})
	return a.changed(nil, a.prefix(req.Prefix))
}

// restore plans a cell's restore as the directory does: restored replicas
// with fresh ids on the lockds asked, its prefixes' epochs raised.
func (a *adminFake) restore(body []byte) (int, any) {
	req, e := decode[api.RestoreCellRequest](body)
	if e != nil {
		return refused(e)
	}
	c := a.cell(req.Cell)
	if c == nil || len(req.On) == 0 {
		return fake.Fail(api.CodeNotFound, "no cell %q, or no --on", req.Cell)
	}
	next := uint64(len(c.Replicas) + 1)
	c.Replicas, c.Endpoints = nil, nil
	for i, l := range req.On {
		c.Replicas = append(c.Replicas, api.ReplicaInfo{ReplicaID: next + uint64(i), Lockd: l, APIAddr: a.addr, Zone: zoneOf(l), Restored: true})
		c.Endpoints = append(c.Endpoints, a.addr)
	}
	c.RestoreIndex, c.Restores = req.BackupIndex, c.Restores+1
	for i := range a.dir.Prefixes {
		if a.dir.Prefixes[i].Cell == c.Name {
			a.dir.Prefixes[i].Epoch++
		}
	}
	return a.changed(c, nil)
}

// member makes one membership change at once (a lockd's leader confirms
// it before it answers).
func (a *adminFake) member(body []byte) (int, any) {
	req, e := decode[api.MemberRequest](body)
	if e != nil {
		return refused(e)
	}
	c := a.cell(req.Cell)
	if c == nil {
		return fake.Fail(api.CodeNotFound, "no cell %q", req.Cell)
	}
	i := slices.IndexFunc(c.Replicas, func(r api.ReplicaInfo) bool { return r.Lockd == req.Lockd })
	switch {
	case req.Action == api.MemberAdd && i < 0:
		id := uint64(len(c.Replicas) + 1)
		c.Replicas = append(c.Replicas, api.ReplicaInfo{ReplicaID: id, Lockd: req.Lockd, APIAddr: a.addr, Zone: zoneOf(req.Lockd), Learner: req.Learner, JoinedLearner: req.Learner})
		c.Endpoints = append(c.Endpoints, a.addr)
	case req.Action == api.MemberPromote && i >= 0:
		c.Replicas[i].Learner = false
	case req.Action == api.MemberRemove && i >= 0:
		c.Replicas = slices.Delete(c.Replicas, i, i+1)
		c.Endpoints = c.Endpoints[1:]
	default:
		return fake.Fail(api.CodeConflict, "%s of lockd %d refused", req.Action, req.Lockd)
	}
	a.dir.Index++
	return 200, *c
}

// migrate commits one step of a migration in the directory.
func (a *adminFake) migrate(body []byte) (int, any) {
	req, e := decode[api.MigrateRequest](body)
	if e != nil {
		return refused(e)
	}
	p := a.prefix(req.Prefix)
	if p == nil {
		return fake.Fail(api.CodeNotFound, "no prefix %s", req.Prefix)
	}
	m := p.Migration
	switch {
	case req.Action == api.MigrateBegin && m == nil:
		a.beginMigration(p, req.To, req.Driver)
	case m == nil:
		return fake.Fail(api.CodeConflict, "no migration of %s in flight", req.Prefix)
	case req.Action == api.MigrateSealed:
		m.SealIndex, m.SealNodes, m.SealDigest = req.SealIndex, req.Nodes, req.Digest
	case req.Action == api.MigrateCommit:
		a.movePrefix(p, m.From, m.To)
		p.Epoch++
		m.Phase = api.MigrationCommitted
	case req.Action == api.MigrateAbort:
		m.Phase = api.MigrationAborting
	case req.Action == api.MigrateEnd:
		p.Migration = nil
	default:
		return fake.Fail(api.CodeConflict, "migrate %s: %s refused", req.Prefix, req.Action)
	}
	return a.changed(nil, p)
}

// beginMigration records a migration of p to cell to, in its sealing
// phase, driven by driver.
func (a *adminFake) beginMigration(p *api.PrefixInfo, to, driver string) {
	a.dir.Index++
	p.Migration = &api.Migration{From: p.Cell, To: to, Phase: api.MigrationSealing, BeganAt: a.dir.Index, Driver: driver, Gen: a.dir.Index}
}

// movePrefix makes cell to serve p instead of cell from.
func (a *adminFake) movePrefix(p *api.PrefixInfo, from, to string) {
	if c := a.cell(from); c != nil {
		c.Prefixes = slices.DeleteFunc(c.Prefixes, func(s string) bool { return s == p.Prefix })
	}
	if c := a.cell(to); c != nil {
		c.Prefixes = append(c.Prefixes, p.Prefix)
	}
	p.Cell = to
}

// prefixOp runs a migration step on a cell: two nodes to copy, whose
// count and digest the seal and the stage agree on.
func (a *adminFake) prefixOp(body []byte) (int, any) {
	req, e := decode[api.PrefixOpRequest](body)
	if e != nil {
		return refused(e)
	}
	const digest = "5f0c3a64d3e1b2a7c9e8f7d6c5b4a3928170f6e5d4c3b2a1908f7e6d5c4b3a29"
	r := api.PrefixOpResponse{Index: 311}
	switch req.Op {
	case api.PrefixSeal:
		r.State, r.Count, r.Digest = "sealed", 2, digest
	case api.PrefixExport:
		r.State = "sealed"
		r.Nodes = []api.ExportedNode{{Path: req.Prefix, Version: 1}, {Path: req.Prefix + "/x", Value: []byte("1"), Version: 1}}
	case api.PrefixStage:
		r.State, r.Count, r.Digest = "staged", 2, digest
	case api.PrefixState:
		r.State = api.PrefixServing
		if p := a.prefix(req.Prefix); p != nil {
			r.Epoch = p.Epoch
		}
	}
	return 200, r
}

// tenant changes a tenant as the directory does; the reply leaves its
// token digests out.
func (a *adminFake) tenant(body []byte) (int, any) {
	req, e := decode[api.TenantRequest](body)
	if e != nil {
		return refused(e)
	}
	i := slices.IndexFunc(a.dir.Tenants, func(t api.Tenant) bool { return t.Name == req.Tenant.Name })
	out := api.TenantResponse{}
	switch {
	case req.Action == api.TenantPut:
		t := req.Tenant
		if i >= 0 {
			t.Tokens = a.dir.Tenants[i].Tokens
			a.dir.Tenants = slices.Delete(a.dir.Tenants, i, i+1)
		}
		if req.NewToken {
			out.Token = fmt.Sprintf("lkd_token%d", a.dir.Index)
			t.Tokens = append(t.Tokens, api.TokenDigest(out.Token))
		}
		a.dir.Tenants = append(a.dir.Tenants, t)
		out.Tenant = t
	case i < 0:
		return fake.Fail(api.CodeNotFound, "no tenant %q", req.Tenant.Name)
	case req.Action == api.TenantRevoke:
		a.dir.Tenants[i].Tokens = nil
		out.Tenant = a.dir.Tenants[i]
	case req.Action == api.TenantDelete:
		out.Tenant = a.dir.Tenants[i]
		a.dir.Tenants = slices.Delete(a.dir.Tenants, i, i+1)
	}
	a.dir.Index++
	out.Index, out.Tenant.Tokens = a.dir.Index, nil
	return 200, out
}

func (a *adminFake) tenants([]byte) (int, any) {
	out := api.TenantsResponse{Auth: true, Tenants: []api.TenantInfo{}}
	for _, t := range a.dir.Tenants {
		out.Tenants = append(out.Tenants, api.TenantInfo{Name: t.Name, Grants: t.Grants, Quota: t.Quota.Effective(), Tokens: len(t.Tokens)})
	}
	return 200, out
}

// startMigration puts a migration of prefix to cell to in flight, sealed
// (for prefix show and migrate --abort).
func (a *adminFake) startMigration(prefix, to string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.prefix(prefix)
	a.beginMigration(p, to, "9b2f64e0c1d84f7a8e3b5c6d7e8f9a0b")
	p.Migration.SealIndex, p.Migration.SealNodes = 311, 2
	p.Migration.SealDigest = "5f0c3a64d3e1b2a7c9e8f7d6c5b4a3928170f6e5d4c3b2a1908f7e6d5c4b3a29"
}
