package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// cred is one kind of credential the attacker sends.
type cred struct {
	kind string // the attack kind its refused requests count under
	desc string // for the record
	// header returns the Authorization header ("": none).
	header func(r *rand.Rand) string
}

// malformedHeaders are Authorization values that are not "Bearer <token>".
var malformedHeaders = []string{"Basic bWFsbG9yeTpzM2NyZXQ=", "Bearer", "bearer lkd_x", "Token lkd_x", "Bearer\tlkd_x", "lkd_x"}

func (x *hostile) creds() []cred {
	return []cred{
		{"cred-none", "no Authorization header", func(*rand.Rand) string { return "" }},
		{"cred-empty", "an empty bearer", func(*rand.Rand) string { return "Bearer " }},
		{"cred-malformed", "a malformed header", func(r *rand.Rand) string { return malformedHeaders[r.IntN(len(malformedHeaders))] }},
		{"cred-wrong", "an unknown token", func(r *rand.Rand) string { return fmt.Sprintf("Bearer lkd_%016x%016x", r.Uint64(), r.Uint64()) }},
		{"cred-revoked", "a revoked token", func(*rand.Rand) string { return "Bearer " + x.revokedToken }},
		{"reader", "the reader's token", func(*rand.Rand) string { return "Bearer " + x.readerToken }},
	}
}

// attackOp is a request outside the reader's grants.
type attackOp struct {
	name   string
	class  string // the reader's kind: reader-<class>
	method string
	route  string
	body   func(r *rand.Rand, n int) any
}

func jsonBody(v any) []byte {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// attackOps are the requests every credential tries: writes of the
// workloads' nodes, the cluster's operations, reads outside the grants,
// routes that do not exist. Each would succeed for an admin (or change
// nothing, for the ones a lockd refuses on their content: they still must
// not pass authentication).
func (x *hostile) attackOps() []attackOp {
	post, get := http.MethodPost, http.MethodGet
	mark := check.HostileMark
	return []attackOp{
		{"admin-tenant", "admin", post, api.RouteAdminTenant, func(_ *rand.Rand, n int) any {
			return api.TenantRequest{Action: api.TenantPut, NewToken: true,
				Tenant: api.Tenant{Name: fmt.Sprintf("%s-root-%d", mark, n%4), Grants: []api.Grant{{Prefix: "/", Roles: []api.Role{api.RoleAdmin}}}}}
		}},
		{"admin-tenants", "admin", get, api.RouteAdminTenants, nil},
		{"migrate", "admin", post, api.RouteAdminMigrate, func(*rand.Rand, int) any {
			return api.MigrateRequest{Prefix: sidePrefix, Action: api.MigrateAbort, BeganAt: 1}
		}},
		{"member", "admin", post, api.RouteAdminMember, func(*rand.Rand, int) any {
			return api.MemberRequest{Cell: sideCell, Action: api.MemberAdd, Lockd: 99, Learner: true}
		}},
		{"keepalive-batch", "admin", post, api.RouteKeepAliveBatch, func(_ *rand.Rand, n int) any {
			return api.KeepAliveBatchRequest{Cell: cellName, Proxy: mark, Sessions: []uint64{uint64(n%64 + 1)}, AgeMS: []int64{0}}
		}},
		{"status", "admin", get, api.RouteStatus, nil},
		{"status-cluster", "admin", get, api.RouteStatusCluster, nil},
		{"put-config", "write", post, api.RoutePut, func(_ *rand.Rand, n int) any {
			return api.PutRequest{Path: fmt.Sprintf("%s/k%d", configBase, n%x.e.cfg.ConfigKeys), Value: fmt.Appendf(nil, "%s-%d", mark, n)}
		}},
		{"delete-acked", "write", post, api.RouteDelete, func(_ *rand.Rand, n int) any {
			return api.DeleteRequest{Path: fmt.Sprintf("%s/acked0-%d", ackedBase, n%100)}
		}},
		{"create", "write", post, api.RouteCreate, func(_ *rand.Rand, n int) any {
			return api.CreateRequest{Path: hostileCreatePath(n), Value: []byte(mark)}
		}},
		{"make-parents", "make-parents", post, api.RouteCreate, func(_ *rand.Rand, n int) any {
			return api.CreateRequest{Path: fmt.Sprintf("%s/x%d", hostileSandbox, n%4), Value: []byte(mark), MakeParents: true}
		}},
		{"get-outside", "outside-read", post, api.RouteGet, func(*rand.Rand, int) any { return api.ReadRequest{Path: sidePrefix + "/v"} }},
		{"children-outside", "outside-read", post, api.RouteChildren, func(*rand.Rand, int) any { return api.ReadRequest{Path: sidePrefix} }},
		{"directory", "directory", get, api.RouteDirectory, nil},
		{"random-path", "random-path", post, "", nil},
	}
}

// hostileCreatePath is the n-th node the attacker tries to create under
// the workloads' prefix (a fixed set, looked for at the end).
func hostileCreatePath(n int) string {
	return fmt.Sprintf("%s/%s-%d", basePath, check.HostileMark, n%8)
}

// hostileCreated are every path the attacker tries to create, and the
// ancestors make_parents would add.
func hostileCreated() []string {
	var out []string
	for n := 0; n < 8; n++ {
		out = append(out, hostileCreatePath(n))
	}
	for n := 0; n < 4; n++ {
		out = append(out, fmt.Sprintf("%s/x%d", hostileSandbox, n))
	}
	return append(out, "/demo/mallory", hostileSandbox)
}

// credLoop tries a random credential on a random operation at a random
// lockd or proxy, paced, until ctx ends.
func (x *hostile) credLoop(ctx context.Context, worker int) {
	r := x.e.rng(fmt.Sprintf("hostile-cred-%d", worker))
	creds, ops, targets := x.creds(), x.attackOps(), x.targets()
	for i := 0; i < hostileMaxRequests && ctx.Err() == nil; i++ {
		c, op := creds[r.IntN(len(creds))], ops[r.IntN(len(ops))]
		route, kind, expect := op.route, c.kind, check.ExpectRefused
		switch {
		case op.class == "random-path":
			route, kind = fmt.Sprintf("/v1/%x/%x", r.Uint32(), r.Uint32()), "random-path"
		case c.kind == "reader":
			kind = "reader-" + op.class
			if op.class == "directory" {
				expect = check.ExpectNoTenants
			}
		}
		var body []byte
		if op.body != nil {
			body = jsonBody(op.body(r, i))
		}
		auth := c.header(r)
		req := check.HostileReply{Kind: kind, Op: op.name, Target: targets[r.IntN(len(targets))], Route: route, Auth: c.desc, Expect: expect}
		// A follower's not_leader names the leader: the attack goes on
		// there (a write past authentication is judged by the leader).
		if l := leaderHint(x.do(ctx, req, op.method, body, auth)); l != "" && l != req.Target {
			req.Target = l
			x.do(ctx, req, op.method, body, auth)
		}
		sleepCtx(ctx, x.pace)
	}
}
