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

// rangeServer is a server with auth on whose directory places /acme on
// cell c1 and /other on c2 (no cell hosted here: a request that passes
// its checks is answered wrong_cell) and knows the tenant acme (token
// "acme-token"), which may read /acme/app only.
func rangeServer(t *testing.T) *Server {
	t.Helper()
	dir, err := directory.New(api.DirectoryResponse{
		Cells:    []api.CellInfo{{Name: "c1", ShardID: 1, Prefixes: []string{"/acme"}}, {Name: "c2", ShardID: 2, Prefixes: []string{"/other"}}},
		Prefixes: []api.PrefixInfo{{Prefix: "/acme", Cell: "c1", Epoch: 1}, {Prefix: "/other", Cell: "c2", Epoch: 1}},
		Tenants: []api.Tenant{{Name: "acme", Grants: []api.Grant{{Prefix: "/acme/app", Roles: []api.Role{api.RoleRead}}},
			Tokens: []string{api.TokenDigest("acme-token")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := New(noCells{dir: dir}, func() api.StatusResponse { return api.StatusResponse{} }, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	s.dir.gap = 0
	s.EnableAuth("admin-token")
	return s
}

// TestRangeAuthorization (mutant lockd_broken_range_acl): a range or a
// change read needs the read role on its root, whole: a tenant with
// read on /acme/app may not read /other, nor /acme (its root outside the
// grant, though part of it is granted), and a span may not leave its
// root (start or end outside it): refused, never answered filtered.
func TestRangeAuthorization(t *testing.T) {
	s := rangeServer(t)
	for _, tc := range []struct {
		name  string
		token string
		route string
		req   any
		code  api.Code // wrong_cell: passed every check (no cell here)
		says  string
	}{
		{"read in the grant", "acme-token", api.RouteRange, api.RangeRequest{Root: "/acme/app", Start: "/acme/app/a", End: "/acme/app/b"}, api.CodeWrongCell, ""},
		{"one key in the grant", "acme-token", api.RouteRange, api.RangeRequest{Root: "/acme/app/k", Start: "/acme/app/k"}, api.CodeWrongCell, ""},
		{"another tenant's prefix", "acme-token", api.RouteRange, api.RangeRequest{Root: "/other", Start: "/other", End: "/other0"}, api.CodeForbidden, "read role on /other"},
		{"root above the grant", "acme-token", api.RouteRange, api.RangeRequest{Root: "/acme", Start: "/acme/app", End: "/acme/app0"}, api.CodeForbidden, "read role on /acme"},
		{"start outside root", "acme-token", api.RouteRange, api.RangeRequest{Root: "/acme/app", Start: "/acme/ap", End: "/acme/app0"}, api.CodeBadRequest, "not at or under root"},
		{"end past root", "acme-token", api.RouteRange, api.RangeRequest{Root: "/acme/app", Start: "/acme/app/a", End: "/acme/b"}, api.CodeBadRequest, "passes root"},
		{"key outside root", "acme-token", api.RouteRange, api.RangeRequest{Root: "/acme/app", Start: "/other/x"}, api.CodeBadRequest, "not at or under root"},
		{"negative limit", "acme-token", api.RouteRange, api.RangeRequest{Root: "/acme/app", Start: "/acme/app", Limit: -1}, api.CodeBadRequest, "negative"},
		{"invalid root", "admin-token", api.RouteRange, api.RangeRequest{Root: "acme", Start: "acme"}, api.CodeInvalidPath, ""},
		{"admin anywhere", "admin-token", api.RouteRange, api.RangeRequest{Root: "/other", Start: "/other", End: "/other0"}, api.CodeWrongCell, ""},
		{"changes in the grant", "acme-token", api.RouteChanges, api.ChangesRequest{Root: "/acme/app/x"}, api.CodeWrongCell, ""},
		{"changes of another prefix", "acme-token", api.RouteChanges, api.ChangesRequest{Root: "/other"}, api.CodeForbidden, "read role on /other"},
		{"changes above the grant", "acme-token", api.RouteChanges, api.ChangesRequest{Root: "/acme"}, api.CodeForbidden, "read role on /acme"},
		{"changes negative wait", "acme-token", api.RouteChanges, api.ChangesRequest{Root: "/acme/app", WaitMS: -1}, api.CodeBadRequest, "negative"},
		{"no token", "", api.RouteChanges, api.ChangesRequest{Root: "/acme/app"}, api.CodeUnauthorized, ""},
		// Ranges: each read checked as one range is; one refused refuses all.
		{"ranges in the grant", "acme-token", api.RouteRanges, api.RangesRequest{Root: "/acme", Reads: []api.RangeRequest{
			{Root: "/acme/app/a", Start: "/acme/app/a"}, {Root: "/acme/app", Start: "/acme/app/b", End: "/acme/app/c"}}}, api.CodeWrongCell, ""},
		{"ranges, one read outside the grant", "acme-token", api.RouteRanges, api.RangesRequest{Root: "/acme", Reads: []api.RangeRequest{
			{Root: "/acme/app/a", Start: "/acme/app/a"}, {Root: "/acme/x", Start: "/acme/x"}}}, api.CodeForbidden, "read role on /acme/x"},
		{"ranges, one read in another prefix", "admin-token", api.RouteRanges, api.RangesRequest{Root: "/acme", Reads: []api.RangeRequest{
			{Root: "/acme/app/a", Start: "/acme/app/a"}, {Root: "/other/x", Start: "/other/x"}}}, api.CodeBadRequest, "not in prefix /acme"},
		{"ranges, a read leaving its root", "acme-token", api.RouteRanges, api.RangesRequest{Root: "/acme", Reads: []api.RangeRequest{
			{Root: "/acme/app", Start: "/acme/app/a", End: "/acme/b"}}}, api.CodeBadRequest, "passes root"},
		{"ranges, none", "admin-token", api.RouteRanges, api.RangesRequest{Root: "/acme"}, api.CodeBadRequest, "MaxRangesPerRead"},
		{"ranges, too many", "admin-token", api.RouteRanges, api.RangesRequest{Root: "/acme", Reads: make([]api.RangeRequest, api.MaxRangesPerRead+1)}, api.CodeBadRequest, "MaxRangesPerRead"},
		{"ranges, invalid root", "admin-token", api.RouteRanges, api.RangesRequest{Root: "acme", Reads: []api.RangeRequest{{Root: "/acme", Start: "/acme"}}}, api.CodeInvalidPath, ""},
		{"ranges, negative limit", "acme-token", api.RouteRanges, api.RangesRequest{Root: "/acme", Reads: []api.RangeRequest{
			{Root: "/acme/app", Start: "/acme/app", Limit: -1}}}, api.CodeBadRequest, "negative"},
		{"ranges, no token", "", api.RouteRanges, api.RangesRequest{Root: "/acme", Reads: []api.RangeRequest{{Root: "/acme/app", Start: "/acme/app"}}}, api.CodeUnauthorized, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI(tc.route)
			if tc.token != "" {
				ctx.Request.Header.Set(api.HeaderAuth, "Bearer "+tc.token)
			}
			ctx.Request.SetBody(b)
			s.Handler(&ctx)
			var er api.ErrorResponse
			if err := json.Unmarshal(ctx.Response.Body(), &er); err != nil || er.Error == nil {
				t.Fatalf("status %d body %q: not an error", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			if er.Error.Code != tc.code || !strings.Contains(er.Error.Message, tc.says) {
				t.Fatalf("%v, want %s saying %q", er.Error, tc.code, tc.says)
			}
		})
	}
}
