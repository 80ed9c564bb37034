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

// txnTenantServer is txnServer with two tenants: acme (write on
// /acme/app, lock on /locks, read on /acme, 4 writes a second) and other
// (write on /other); a revoked token of acme's is in no tenant.
func txnTenantServer(t *testing.T) *Server {
	t.Helper()
	acme := api.Tenant{Name: "acme", Tokens: []string{api.TokenDigest("acme-token")}, Quota: api.Quota{WritesPerSec: 4},
		Grants: []api.Grant{{Prefix: "/acme/app", Roles: []api.Role{api.RoleWrite}}, {Prefix: "/locks", Roles: []api.Role{api.RoleLock}},
			{Prefix: "/acme", Roles: []api.Role{api.RoleRead}}}}
	other := api.Tenant{Name: "other", Tokens: []string{api.TokenDigest("other-token")},
		Grants: []api.Grant{{Prefix: "/other", Roles: []api.Role{api.RoleWrite}}}}
	dir, err := directory.New(api.DirectoryResponse{
		Cells: []api.CellInfo{{Name: "c1", ShardID: 1, Prefixes: []string{"/acme", "/locks"}}, {Name: "c2", ShardID: 2, Prefixes: []string{"/other"}}},
		Prefixes: []api.PrefixInfo{{Prefix: "/acme", Cell: "c1", Epoch: 1}, {Prefix: "/locks", Cell: "c1", Epoch: 1},
			{Prefix: "/other", Cell: "c2", Epoch: 1}},
		Tenants: []api.Tenant{acme, other},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := New(noCells{dir: dir}, func() api.StatusResponse { return api.StatusResponse{} }, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	s.dir.gap = 0
	s.EnableAuth("admin-token")
	return s
}

// txnCall sends req to s's txn route with token, and returns the error
// code and message ("" if none).
func txnCall(t *testing.T, s *Server, token string, req api.TxnRequest) (api.Code, string) {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI(api.RouteTxn)
	if token != "" {
		ctx.Request.Header.Set(api.HeaderAuth, "Bearer "+token)
	}
	ctx.Request.SetBody(b)
	s.Handler(&ctx)
	var er api.ErrorResponse
	if err := json.Unmarshal(ctx.Response.Body(), &er); err != nil || er.Error == nil {
		return "", ""
	}
	return er.Error.Code, er.Error.Message
}

// TestAttackTxnTenants: a hostile tenant on /v1/txn. A revoked token, a
// write or a condition on another tenant's path, a create with only the
// lock role, all refused before any cell sees the request, and no
// refusal names another tenant's version, cell or existence. (No cell is
// hosted here: a request that passes every check fails later with
// another code, which the cases tell apart.)
func TestAttackTxnTenants(t *testing.T) {
	s := txnTenantServer(t)
	put := func(p string) api.TxnOp { return api.TxnOp{Op: api.TxnPut, Path: p, Value: []byte("v")} }
	for _, tc := range []struct {
		name, token string
		req         api.TxnRequest
		code        api.Code
		says        string
	}{
		{"revoked token", "acme-old-token", api.TxnRequest{Then: []api.TxnOp{put("/acme/app/a")}}, api.CodeUnauthorized, "token"},
		{"another tenant's write", "acme-token", api.TxnRequest{Then: []api.TxnOp{put("/acme/app/a"), put("/other/x")}},
			api.CodeForbidden, "write 1"},
		{"another tenant's version", "acme-token", api.TxnRequest{If: []api.TxnCond{{If: api.CondVersion, Path: "/other/x", Version: 1}},
			Then: []api.TxnOp{put("/acme/app/a")}}, api.CodeForbidden, "condition 0"},
		{"another tenant's existence", "acme-token", api.TxnRequest{If: []api.TxnCond{{If: api.CondMissing, Path: "/other/x"}},
			Then: []api.TxnOp{put("/acme/app/a")}}, api.CodeForbidden, "condition 0"},
		{"another tenant's lock", "acme-token", api.TxnRequest{If: []api.TxnCond{{If: api.CondHolds, Path: "/other/L", Token: 7}},
			Then: []api.TxnOp{put("/acme/app/a")}}, api.CodeForbidden, "condition 0"},
		{"lock role creates", "acme-token", api.TxnRequest{WriteHeader: api.WriteHeader{Session: 3},
			Then: []api.TxnOp{{Op: api.TxnCreate, Path: "/locks/j/x", Ephemeral: true}}}, api.CodeForbidden, "write 0"},
		{"read role writes", "acme-token", api.TxnRequest{Then: []api.TxnOp{put("/acme/cfg")}}, api.CodeForbidden, "write 0"},
		{"other tenant's token on acme", "other-token", api.TxnRequest{If: []api.TxnCond{{If: api.CondExists, Path: "/acme/app/a"}},
			Then: []api.TxnOp{put("/other/x")}}, api.CodeForbidden, "condition 0"},
	} {
		code, msg := txnCall(t, s, tc.token, tc.req)
		if code != tc.code || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %s %q, want %s saying %q", tc.name, code, msg, tc.code, tc.says)
		}
		if strings.Contains(msg, "c2") || strings.Contains(msg, "version 1") {
			t.Errorf("%s: the refusal %q tells another tenant's cell or version", tc.name, msg)
		}
	}
}

// TestAttackTxnRateLimit: a transaction takes one write per write from
// its tenant's per-second quota: 16 puts in one request do not pass a
// quota of 4 a second, and a txn that used the bucket up leaves none for
// the next write.
func TestAttackTxnRateLimit(t *testing.T) {
	s := txnTenantServer(t)
	ops := func(n int) []api.TxnOp {
		out := make([]api.TxnOp, n)
		for i := range out {
			out[i] = api.TxnOp{Op: api.TxnPut, Path: "/acme/app/k" + string(rune('a'+i)), Value: []byte("v")}
		}
		return out
	}
	if code, msg := txnCall(t, s, "acme-token", api.TxnRequest{Then: ops(api.MaxTxnOps)}); code != api.CodeQuotaExceeded {
		t.Fatalf("16 puts at 4 writes/s: %s %q, want quota_exceeded", code, msg)
	}
	s2 := txnTenantServer(t)
	if code, msg := txnCall(t, s2, "acme-token", api.TxnRequest{Then: ops(4)}); code == api.CodeQuotaExceeded || code == api.CodeForbidden {
		t.Fatalf("4 puts at 4 writes/s: %s %q, want past the limiter", code, msg)
	}
	if code, msg := txnCall(t, s2, "acme-token", api.TxnRequest{Then: ops(1)}); code != api.CodeQuotaExceeded {
		t.Fatalf("a put after a txn of 4 at 4 writes/s: %s %q, want quota_exceeded", code, msg)
	}
}
