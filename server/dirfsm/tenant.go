package dirfsm

import (
	"slices"
	"sort"

	"github.com/lockservice/lockd/api"
)

// TenantChange is a tenant's change as committed: the request, and the
// digest of the token the proposer made for it, if any (the token itself
// never enters the log).
type TenantChange struct {
	api.TenantRequest
	TokenDigest string `json:"token_digest,omitempty"`
}

// tenant applies a tenant change. Put keeps the tenant's tokens (and adds
// the new one's digest); the change is checked in full first.
func (s *State) tenant(c *TenantChange) Result {
	name := c.Tenant.Name
	old, exists := s.tenants[name]
	switch c.Action {
	case api.TenantPut:
		t := c.Tenant
		if err := t.Validate(); err != nil {
			return Result{Err: api.AsError(err)}
		}
		t.Tokens = slices.Clone(old.Tokens)
		if c.TokenDigest != "" {
			for other, ot := range s.tenants {
				if other != name && slices.Contains(ot.Tokens, c.TokenDigest) {
					return refuse(api.CodeConflict, "token already belongs to another tenant")
				}
			}
			if len(t.Tokens) >= api.MaxTenantTokens {
				return refuse(api.CodeLimitExceeded, "tenant %s has %d tokens, limit %d: revoke them first", name, len(t.Tokens), api.MaxTenantTokens)
			}
			t.Tokens = append(t.Tokens, c.TokenDigest)
		}
		s.tenants[name] = t
		return Result{Tenant: &t}
	case api.TenantRevoke, api.TenantDelete:
		if !exists {
			return refuse(api.CodeNotFound, "no tenant %q", name)
		}
		if c.Action == api.TenantDelete {
			delete(s.tenants, name)
			return Result{Tenant: &old}
		}
		old.Tokens = nil
		s.tenants[name] = old
		return Result{Tenant: &old}
	}
	return refuse(api.CodeBadRequest, "tenant action %q: use put, revoke or delete", c.Action)
}

func (s *State) tenantList() []api.Tenant {
	out := make([]api.Tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
