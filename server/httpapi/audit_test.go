package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/audit"
	"github.com/lockservice/lockd/server/dirfsm"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDescribe: what each audited route's record says, from its request
// and reply; a new token is named by its id only.
func TestDescribe(t *testing.T) {
	const newTok = "lkd_a-new-token-never-to-be-recorded"
	grants := []api.Grant{{Prefix: "/demo/a", Roles: []api.Role{api.RoleLock, api.RoleRead}}}
	for _, tc := range []struct {
		name  string
		route string
		body  any
		v     any
		want  []audit.Record
	}{
		{"a tenant made with a token", api.RouteAdminTenant,
			api.TenantRequest{Action: api.TenantPut, Tenant: api.Tenant{Name: "team-a", Grants: grants}, NewToken: true},
			api.TenantResponse{Token: newTok, Index: 9},
			[]audit.Record{
				{Action: audit.ActTenant, Step: "put", Target: audit.Target{Tenant: "team-a", Grants: []string{"/demo/a=lock+read"}, Index: 9}},
				{Action: audit.ActTokenIssue, Step: "put", Target: audit.Target{Tenant: "team-a", TokenID: audit.TokenID(newTok), Index: 9}},
			}},
		{"tokens revoked", api.RouteAdminTenant, api.TenantRequest{Action: api.TenantRevoke, Tenant: api.Tenant{Name: "team-a"}}, nil,
			[]audit.Record{{Action: audit.ActTokenRevoke, Step: "revoke", Target: audit.Target{Tenant: "team-a"}}}},
		{"a tenant deleted", api.RouteAdminTenant, api.TenantRequest{Action: api.TenantDelete, Tenant: api.Tenant{Name: "team-a", Grants: grants}}, nil,
			[]audit.Record{{Action: audit.ActTenant, Step: "delete", Target: audit.Target{Tenant: "team-a"}}}},
		{"a relayed tenant change", api.RouteAdminTenantCommit,
			dirfsm.TenantChange{TenantRequest: api.TenantRequest{Action: api.TenantPut, Tenant: api.Tenant{Name: "team-a"}}, TokenDigest: api.TokenDigest(newTok)},
			dirfsm.Result{Index: 4},
			[]audit.Record{{Action: audit.ActTenantCommit, Step: "put", Target: audit.Target{Tenant: "team-a", TokenID: audit.TokenID(newTok), Index: 4}}}},
		{"a move begun", api.RouteAdminMigrate, api.MigrateRequest{Prefix: "/demo", Action: api.MigrateBegin, To: "payments"}, dirfsm.Result{Index: 12},
			[]audit.Record{{Action: audit.ActMove, Step: "begin", Target: audit.Target{Prefix: "/demo", To: "payments", Index: 12}}}},
		{"a restore", api.RouteAdminRestore, api.RestoreCellRequest{Cell: "demo", BackupIndex: 77}, nil,
			[]audit.Record{{Action: audit.ActRestore, Target: audit.Target{Cell: "demo", Index: 77}}}},
		{"a membership change", api.RouteAdminMember, api.MemberRequest{Cell: "demo", Action: api.MemberRemove, Lockd: 4}, nil,
			[]audit.Record{{Action: audit.ActMember, Step: "remove", Target: audit.Target{Cell: "demo", Lockd: 4}}}},
		{"a backup", api.RouteAdminBackup, api.BackupRequest{Cell: "demo"}, api.BackupResponse{SnapshotResponse: api.SnapshotResponse{Index: 5}, Location: "/b/demo/5"},
			[]audit.Record{{Action: audit.ActBackup, Target: audit.Target{Cell: "demo", Index: 5, Location: "/b/demo/5"}}}},
		{"a body that does not decode", api.RouteAdminCellCreate, "not an object", nil,
			[]audit.Record{{Action: audit.ActCellCreate}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := describe(tc.route, auditedRoutes[tc.route], mustJSON(t, tc.body), tc.v)
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.want) {
				t.Fatalf("describe = %+v\nwant       %+v", got, tc.want)
			}
			if strings.Contains(fmt.Sprintf("%+v", got), newTok) {
				t.Fatal("a record holds the token")
			}
		})
	}
}

// TestAdminRoutesAreAudited: through the handler, an admin call, a
// tenant-less call without a token and one with an unknown token each
// leave a record naming the caller by token id and address (a proxy's
// client as claimed), and no record holds a token.
func TestAdminRoutesAreAudited(t *testing.T) {
	s, buf := auditedTestServer(t)
	const unknown = "lkd_an-unknown-token"
	for _, tc := range []struct {
		name, route, auth, claimed string
		body                       any
		want                       []string
	}{
		{"an admin's move step", api.RouteAdminMigrate, wireTestAdmin, "",
			api.MigrateRequest{Prefix: "/demo", Action: api.MigrateAbort},
			[]string{"action=prefix.move", "step=abort", "result=unavailable", "tenant=" + api.BootstrapAdmin, "token_id=" + audit.TokenID(wireTestAdmin), "target.prefix=/demo"}},
		{"no token, through a proxy", api.RouteAdminCellCreate, "", "10.1.2.3:4567",
			api.CreateCellRequest{Name: "x"},
			[]string{"action=cell.create", "result=unauthorized", "claimed_client=10.1.2.3:4567"}},
		{"an unknown token", api.RouteAdminTenant, unknown, "",
			api.TenantRequest{Action: api.TenantRevoke, Tenant: api.Tenant{Name: "a"}},
			[]string{"action=tenant", "result=unauthorized"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf.Reset()
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI(tc.route)
			if tc.auth != "" {
				ctx.Request.Header.Set(api.HeaderAuth, "Bearer "+tc.auth)
			}
			if tc.claimed != "" {
				ctx.Request.Header.Set(api.HeaderClientAddr, tc.claimed)
			}
			ctx.Request.SetBody(mustJSON(t, tc.body))
			s.Handler(&ctx)
			line := buf.String()
			if strings.Count(line, "audit=true") != 1 {
				t.Fatalf("want one audit record, got %q", line)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("record %q lacks %q", line, w)
				}
			}
			if strings.Contains(line, wireTestAdmin) || strings.Contains(line, unknown) {
				t.Fatalf("a record holds a token: %q", line)
			}
		})
	}
}

// auditedTestServer is wireTestServer with its audit log written, as
// text, to the returned buffer.
func auditedTestServer(t *testing.T) (*Server, *bytes.Buffer) {
	t.Helper()
	s := wireTestServer(t)
	var buf bytes.Buffer
	l, err := audit.New(slog.New(slog.NewTextHandler(&buf, nil)), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetAudit(l)
	return s, &buf
}
