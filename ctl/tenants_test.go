package ctl

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

func TestParseGrant(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // grantList of the result; "" for an error
	}{
		{"/payments=write,lock", "/payments=write,lock"},
		{"/=admin", "/=admin"},
		{"/payments", ""},
		{"=read", ""},
		{"/payments=", ""},
	} {
		g, err := parseGrant(c.in)
		if c.want == "" {
			if api.CodeOf(err) != api.CodeBadRequest {
				t.Errorf("parseGrant(%q) = %v, %v; want bad_request", c.in, g, err)
			}
			continue
		}
		if err != nil || grantList([]api.Grant{g}) != c.want {
			t.Errorf("parseGrant(%q) = %v, %v", c.in, g, err)
		}
	}
}

// tenant token makes a token and keeps the tenant's own quota: the
// effective quota tenant list shows (defaults filled in) would pin today's
// defaults into the tenant.
func TestTenantTokenKeepsQuota(t *testing.T) {
	f := newFakeServer(t)
	a := newAdminFake(f)
	at(t, f, "tenant", "token", "payments").ok(t)
	a.mu.Lock()
	defer a.mu.Unlock()
	if q := a.dir.Tenants[0].Quota; q != (api.Quota{Nodes: 50000}) || len(a.dir.Tenants[0].Tokens) != 2 {
		t.Fatalf("after tenant token: quota %+v, %d tokens; want its own quota {nodes 50000} and 2 tokens", q, len(a.dir.Tenants[0].Tokens))
	}
}
