package dirfsm

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

func TestTenantChanges(t *testing.T) {
	a := bootstrapped(t, 5)
	s := a.s
	apply := func(c TenantChange) Result {
		t.Helper()
		return a.do(Command{Op: OpTenant, Tenant: &c})
	}
	pay := api.Tenant{Name: "pay", Grants: []api.Grant{{Prefix: "/payments", Roles: []api.Role{api.RoleWrite}}}}
	if r := apply(TenantChange{TenantRequest: api.TenantRequest{Action: api.TenantPut, Tenant: pay}, TokenDigest: "d1"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// A put keeps the tokens and adds a new one's digest.
	pay.Grants = append(pay.Grants, api.Grant{Prefix: "/orders", Roles: []api.Role{api.RoleRead}})
	if r := apply(TenantChange{TenantRequest: api.TenantRequest{Action: api.TenantPut, Tenant: pay}, TokenDigest: "d2"}); r.Err != nil || len(r.Tenant.Tokens) != 2 || len(r.Tenant.Grants) != 2 {
		t.Fatalf("second put: %+v", r)
	}
	// Refusals change nothing: a bad role, a digest another tenant has, an unknown tenant.
	before := s.Response()
	for _, c := range []TenantChange{
		{TenantRequest: api.TenantRequest{Action: api.TenantPut, Tenant: api.Tenant{Name: "x", Grants: []api.Grant{{Prefix: "/x", Roles: []api.Role{"root"}}}}}},
		{TenantRequest: api.TenantRequest{Action: api.TenantPut, Tenant: api.Tenant{Name: "y"}}, TokenDigest: "d1"},
		{TenantRequest: api.TenantRequest{Action: api.TenantDelete, Tenant: api.Tenant{Name: "nobody"}}},
		{TenantRequest: api.TenantRequest{Action: "rename", Tenant: api.Tenant{Name: "pay"}}},
	} {
		if r := apply(c); r.Err == nil {
			t.Fatalf("%+v was taken", c)
		}
	}
	after := s.Response()
	before.Index, after.Index = 0, 0
	if b1, _ := json.Marshal(before); !bytes.Equal(b1, mustJSON(t, after)) {
		t.Fatal("a refused tenant change changed the directory")
	}
	// The view finds a tenant by its token; a snapshot keeps them.
	view, err := directory.New(s.Response())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := view.TenantByToken("d1"); ok {
		t.Fatal("the view took a digest for a token")
	}
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	restored := NewState()
	if err := restored.Load(&buf); err != nil {
		t.Fatal(err)
	}
	if got := restored.Response().Tenants; len(got) != 1 || len(got[0].Tokens) != 2 {
		t.Fatalf("restored tenants: %+v", got)
	}
	if r := apply(TenantChange{TenantRequest: api.TenantRequest{Action: api.TenantRevoke, Tenant: api.Tenant{Name: "pay"}}}); r.Err != nil || len(r.Tenant.Tokens) != 0 {
		t.Fatalf("revoke: %+v", r)
	}
	if r := apply(TenantChange{TenantRequest: api.TenantRequest{Action: api.TenantDelete, Tenant: api.Tenant{Name: "pay"}}}); r.Err != nil || len(s.Response().Tenants) != 0 {
		t.Fatalf("delete: %+v", r)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
