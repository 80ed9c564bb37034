package api

import "testing"

func TestTenantAllows(t *testing.T) {
	tn := Tenant{Name: "pay", Grants: []Grant{
		{Prefix: "/payments", Roles: []Role{RoleWrite}},
		{Prefix: "/shared/cfg", Roles: []Role{RoleRead}},
		{Prefix: "/locks", Roles: []Role{RoleLock}},
	}}
	for _, c := range []struct {
		role Role
		path string
		want bool
	}{
		{RoleWrite, "/payments", true},
		{RoleWrite, "/payments/a/b", true},
		{RoleRead, "/payments/a", true}, // write implies read
		{RoleLock, "/payments/a", false},
		{RoleAdmin, "/payments", false},
		{RoleWrite, "/paymentsx", false}, // whole segments only
		{RoleRead, "/shared/cfg/x", true},
		{RoleWrite, "/shared/cfg/x", false},
		{RoleRead, "/shared", false}, // a grant does not reach up
		{RoleLock, "/locks/l", true},
		{RoleRead, "/locks/l", true}, // lock implies read
		{RoleWrite, "/locks/l", false},
		{RoleRead, "/other", false},
	} {
		if got := tn.Allows(c.role, c.path); got != c.want {
			t.Errorf("Allows(%s, %s) = %v, want %v", c.role, c.path, got, c.want)
		}
	}
	if tn.IsAdmin() {
		t.Error("a tenant without admin on / is an admin")
	}
	root := Tenant{Name: "ops", Grants: []Grant{{Prefix: "/", Roles: []Role{RoleAdmin}}}}
	if !root.IsAdmin() || !root.Allows(RoleWrite, "/anything/at/all") {
		t.Error("admin on / is not an admin of everything")
	}
	sub := Tenant{Name: "sub", Grants: []Grant{{Prefix: "/payments", Roles: []Role{RoleAdmin}}}}
	if sub.IsAdmin() || !sub.Allows(RoleWrite, "/payments/x") {
		t.Error("admin on a prefix: not a cluster admin, but everything under it")
	}
}

func TestTenantValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		t    Tenant
		ok   bool
	}{
		{"good", Tenant{Name: "a", Grants: []Grant{{Prefix: "/p", Roles: []Role{RoleRead}}}}, true},
		{"root grant", Tenant{Name: "a", Grants: []Grant{{Prefix: "/", Roles: []Role{RoleAdmin}}}}, true},
		{"no name", Tenant{}, false},
		{"slash in name", Tenant{Name: "a/b"}, false},

		{"bad prefix", Tenant{Name: "a", Grants: []Grant{{Prefix: "p", Roles: []Role{RoleRead}}}}, false},
		{"no role", Tenant{Name: "a", Grants: []Grant{{Prefix: "/p"}}}, false},
		{"unknown role", Tenant{Name: "a", Grants: []Grant{{Prefix: "/p", Roles: []Role{"root"}}}}, false},
		{"negative quota", Tenant{Name: "a", Quota: Quota{Nodes: -1}}, false},
	} {
		if err := c.t.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate = %v", c.name, err)
		}
	}
	for _, name := range []string{BootstrapAdmin, "a\x00b"} {
		if CheckNewName(name) == nil || CheckNewName("team-"+name[:1]) != nil {
			t.Errorf("CheckNewName(%q) took it", name)
		}
	}
	q := Quota{Nodes: 5}.Effective()
	if q.Nodes != 5 || q.Sessions != DefaultQuota.Sessions || q.WritesPerSec != DefaultQuota.WritesPerSec {
		t.Errorf("Effective = %+v", q)
	}
	for _, h := range []string{"Bearer", "Basic abc", "Bearer "} {
		if _, err := BearerToken(h); err == nil {
			t.Errorf("BearerToken(%q) took it", h)
		}
	}
	if tok, err := BearerToken("Bearer xyz"); err != nil || tok != "xyz" {
		t.Errorf("BearerToken = %q, %v", tok, err)
	}
}

func TestTenantGrantRoot(t *testing.T) {
	tn := Tenant{Name: "t", Grants: []Grant{
		{Prefix: "/demo/team/alice", Roles: []Role{RoleWrite}},
		{Prefix: "/demo/team", Roles: []Role{RoleRead}},
		{Prefix: "/demo", Roles: []Role{RoleLock}},
	}}
	for _, tc := range []struct {
		role       Role
		path, root string
		ok         bool
	}{
		{RoleWrite, "/demo/team/alice/x", "/demo/team/alice", true},
		{RoleRead, "/demo/team/alice/x", "/demo", true}, // lock implies read
		{RoleLock, "/demo/team/alice/x", "/demo", true},
		{RoleWrite, "/demo/team/bob", "", false},
		{RoleRead, "/payments/x", "", false},
	} {
		root, ok := tn.GrantRoot(tc.role, tc.path)
		if root != tc.root || ok != tc.ok {
			t.Errorf("GrantRoot(%s, %s) = %q, %v; want %q, %v", tc.role, tc.path, root, ok, tc.root, tc.ok)
		}
	}
}
