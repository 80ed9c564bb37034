package httpapi

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// txnServer is a server with auth on whose directory places /acme and
// /locks on cell c1 and /other on cell c2 (no cell is hosted here).
func txnServer(t *testing.T) *Server {
	t.Helper()
	dir, err := directory.New(api.DirectoryResponse{
		Cells: []api.CellInfo{{Name: "c1", ShardID: 1, Prefixes: []string{"/acme", "/locks"}}, {Name: "c2", ShardID: 2, Prefixes: []string{"/other"}}},
		Prefixes: []api.PrefixInfo{{Prefix: "/acme", Cell: "c1", Epoch: 1}, {Prefix: "/locks", Cell: "c1", Epoch: 1},
			{Prefix: "/other", Cell: "c2", Epoch: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := New(noCells{dir: dir}, func() api.StatusResponse { return api.StatusResponse{} }, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	s.dir.gap = 0
	s.EnableAuth("admin-token")
	return s
}

// TestTxnAuthorization: each write is authorized as its single write
// (write role; the lock role only for the session's own ephemeral nodes,
// OwnOnly; make_parents within the grant), each condition needs the read
// role (a tenant reads no other tenant's version or lock through one).
func TestTxnAuthorization(t *testing.T) {
	acme := principal{name: "acme", tenant: api.Tenant{Name: "acme", Grants: []api.Grant{
		{Prefix: "/acme/app", Roles: []api.Role{api.RoleWrite}}, {Prefix: "/locks", Roles: []api.Role{api.RoleLock}}}}}
	reader := principal{name: "reader", tenant: api.Tenant{Name: "reader", Grants: []api.Grant{{Prefix: "/acme", Roles: []api.Role{api.RoleRead}}}}}
	admin := principal{name: api.BootstrapAdmin, admin: true}
	put := func(p string) api.TxnOp { return api.TxnOp{Op: api.TxnPut, Path: p} }
	for _, tc := range []struct {
		name    string
		p       principal
		req     api.TxnRequest
		refused string // "" allowed, else a piece of the refusal
		ownOnly []bool
		from    []string
	}{
		{name: "admin anywhere", p: admin, req: api.TxnRequest{If: []api.TxnCond{{If: api.CondExists, Path: "/other/x"}}, Then: []api.TxnOp{put("/other/x")}},
			ownOnly: []bool{false}, from: []string{""}},
		{name: "tenant in its grant", p: acme, req: api.TxnRequest{If: []api.TxnCond{{If: api.CondHolds, Path: "/locks/job", Token: 5}},
			Then: []api.TxnOp{put("/acme/app/a"), {Op: api.TxnCreate, Path: "/acme/app/b/c", MakeParents: true}}},
			ownOnly: []bool{false, false}, from: []string{"/acme/app", "/acme/app"}},
		{name: "tenant outside its grant", p: acme, req: api.TxnRequest{Then: []api.TxnOp{put("/acme/app/a"), put("/acme/other")}}, refused: "write 1"},
		{name: "another tenant's version in a condition", p: acme, req: api.TxnRequest{If: []api.TxnCond{{If: api.CondVersion, Path: "/other/secret", Version: 3}},
			Then: []api.TxnOp{put("/acme/app/a")}}, refused: "condition 0"},
		{name: "lock role: own ephemeral put with a session", p: acme, req: api.TxnRequest{WriteHeader: api.WriteHeader{Session: 7},
			Then: []api.TxnOp{put("/locks/job/lock-0000000001")}}, ownOnly: []bool{true}, from: []string{"/locks"}},
		{name: "lock role: put without a session", p: acme, req: api.TxnRequest{Then: []api.TxnOp{put("/locks/job/x")}}, refused: "write 0"},
		{name: "lock role: no create", p: acme, req: api.TxnRequest{WriteHeader: api.WriteHeader{Session: 7},
			Then: []api.TxnOp{{Op: api.TxnCreate, Path: "/locks/job/x", Ephemeral: true}}}, refused: "write 0"},
		{name: "read role: no write", p: reader, req: api.TxnRequest{If: []api.TxnCond{{If: api.CondExists, Path: "/acme/app/a"}},
			Then: []api.TxnOp{put("/acme/app/a")}}, refused: "write 0"},
	} {
		whos, err := (&Server{}).txnCallers(tc.p, &tc.req)
		if tc.refused != "" {
			if api.CodeOf(err) != api.CodeForbidden || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s: %v, want forbidden naming %s", tc.name, err, tc.refused)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: refused %v", tc.name, err)
			continue
		}
		for i, who := range whos {
			if who.OwnOnly != tc.ownOnly[i] || who.ParentsFrom != tc.from[i] || who.Admin != tc.p.admin || who.Tenant != tc.p.name {
				t.Errorf("%s: write %d's caller %+v, want own-only %v from %q", tc.name, i, who, tc.ownOnly[i], tc.from[i])
			}
		}
	}
}

// TestTxnRoute: without a token, over the bounds, or across two cells, a
// transaction is refused before any cell sees it, with a stable code.
func TestTxnRoute(t *testing.T) {
	s := txnServer(t)
	body := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	put := func(p string) api.TxnOp { return api.TxnOp{Op: api.TxnPut, Path: p, Value: []byte("v")} }
	tooMany := make([]api.TxnOp, api.MaxTxnOps+1)
	for i := range tooMany {
		tooMany[i] = put("/acme/x")
	}
	for _, tc := range []struct {
		name  string
		token string
		body  []byte
		code  api.Code
		says  string
	}{
		{"no token", "", body(api.TxnRequest{Then: []api.TxnOp{put("/acme/a")}}), api.CodeUnauthorized, "token"},
		{"wrong token", "nope", body(api.TxnRequest{Then: []api.TxnOp{put("/acme/a")}}), api.CodeUnauthorized, "token"},
		{"two cells", "admin-token", body(api.TxnRequest{If: []api.TxnCond{{If: api.CondMissing, Path: "/other/b"}}, Then: []api.TxnOp{put("/acme/a")}}),
			api.CodeBadRequest, "cell c1 and /other/b on cell c2"},
		{"too many writes", "admin-token", body(api.TxnRequest{Then: tooMany}), api.CodeBadRequest, "MaxTxnOps"},
		{"no writes", "admin-token", body(api.TxnRequest{}), api.CodeBadRequest, "at least one write"},
		{"values too large", "admin-token", body(api.TxnRequest{Then: []api.TxnOp{
			{Op: api.TxnPut, Path: "/acme/a", Value: make([]byte, api.MaxTxnValueBytes/2+1)},
			{Op: api.TxnPut, Path: "/acme/b", Value: make([]byte, api.MaxTxnValueBytes/2+1)}}}), api.CodeValueTooLarge, "MaxTxnValueBytes"},
		{"unknown write", "admin-token", []byte(`{"then":[{"op":"upsert","path":"/acme/a"}]}`), api.CodeBadRequest, "unknown op"},
		{"body past the bound", "admin-token", make([]byte, api.MaxRequestBody+1), api.CodeValueTooLarge, ""},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(api.RouteTxn)
		if tc.token != "" {
			ctx.Request.Header.Set(api.HeaderAuth, "Bearer "+tc.token)
		}
		ctx.Request.SetBody(tc.body)
		s.Handler(&ctx)
		var er api.ErrorResponse
		if err := json.Unmarshal(ctx.Response.Body(), &er); err != nil || er.Error == nil {
			t.Errorf("%s: status %d body %q: not an error", tc.name, ctx.Response.StatusCode(), ctx.Response.Body())
			continue
		}
		if er.Error.Code != tc.code || !strings.Contains(er.Error.Message, tc.says) || ctx.Response.StatusCode() != tc.code.HTTPStatus() {
			t.Errorf("%s: %d %v, want %s saying %q", tc.name, ctx.Response.StatusCode(), er.Error, tc.code, tc.says)
		}
	}
}
