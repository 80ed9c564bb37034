package sdk

import (
	"context"

	"github.com/lockservice/lockd/api"
)

// PutTenant creates a tenant or replaces its grants and quota (its tokens
// are kept); with newToken it also makes an API token for it, returned
// once in the reply (the service keeps only its digest). Admin only. A
// call that makes a token is not retried when its outcome is unknown: a
// lost reply would leave a second, unseen token.
func (c *Client) PutTenant(ctx context.Context, t api.Tenant, newToken bool) (api.TenantResponse, error) {
	return c.tenantCall(ctx, api.TenantRequest{Action: api.TenantPut, Tenant: t, NewToken: newToken}, !newToken)
}

// RevokeTenantTokens drops every API token of a tenant (admin only): a
// revoked token is refused from the moment each lockd's view has the
// change (it reads the directory on an unknown token, and follows it).
func (c *Client) RevokeTenantTokens(ctx context.Context, name string) (api.TenantResponse, error) {
	return c.tenantCall(ctx, api.TenantRequest{Action: api.TenantRevoke, Tenant: api.Tenant{Name: name}}, true)
}

// DeleteTenant removes a tenant and its tokens (admin only). What its
// sessions hold stays until they end.
func (c *Client) DeleteTenant(ctx context.Context, name string) (api.TenantResponse, error) {
	return c.tenantCall(ctx, api.TenantRequest{Action: api.TenantDelete, Tenant: api.Tenant{Name: name}}, true)
}

func (c *Client) tenantCall(ctx context.Context, req api.TenantRequest, retryUnsure bool) (api.TenantResponse, error) {
	var resp api.TenantResponse
	err := c.do(ctx, c.seeds, &call{route: api.RouteAdminTenant, req: req, resp: &resp, anyReplica: true, retryUnsure: retryUnsure, write: true})
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		_ = c.RefreshDirectory(rctx) // an admin's view lists the tenants
		cancel()
	}
	return resp, err
}

// Tenants lists the tenants, their grants, effective quotas and how many
// tokens each has (admin only).
func (c *Client) Tenants(ctx context.Context) (api.TenantsResponse, error) {
	var resp api.TenantsResponse
	err := c.do(ctx, c.seeds, &call{method: "GET", route: api.RouteAdminTenants, resp: &resp, anyReplica: true, retryUnsure: true})
	return resp, err
}
