package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// newAdminToken is the run's bootstrap admin token.
func newAdminToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "chaos-admin-" + hex.EncodeToString(b[:])
}

// putTenant creates a tenant with grants and returns its new token.
func putTenant(ctx context.Context, admin *sdk.Client, name string, grants ...api.Grant) (string, error) {
	res, err := admin.PutTenant(ctx, api.Tenant{Name: name, Grants: grants}, true)
	if err != nil {
		return "", fmt.Errorf("tenant %s: %w", name, err)
	}
	if res.Token == "" {
		return "", fmt.Errorf("tenant %s: no token in the reply", name)
	}
	return res.Token, nil
}

// workloadGrant is what the workloads' tenant holds: write and lock on
// the workloads' prefix.
var workloadGrant = api.Grant{Prefix: basePath, Roles: []api.Role{api.RoleWrite, api.RoleLock}}

// setupHostile makes mallory (read on the workloads' prefix, write on a
// sandbox whose parent does not exist) and the revoked tenant (write and
// lock on the workloads' prefix): it opens a session through a proxy (or
// a lockd), then its tokens are revoked, and the attacker keeps trying
// both.
func (x *hostile) setup(ctx context.Context, admin *sdk.Client) error {
	var err error
	if x.readerToken, err = putTenant(ctx, admin, hostileTenant,
		api.Grant{Prefix: basePath, Roles: []api.Role{api.RoleRead}},
		api.Grant{Prefix: hostileSandbox, Roles: []api.Role{api.RoleWrite}}); err != nil {
		return err
	}
	if x.revokedToken, err = putTenant(ctx, admin, revokedTenant, workloadGrant); err != nil {
		return err
	}
	at := x.lockds[0]
	if len(x.proxies) > 0 {
		at = x.proxies[0]
	}
	if s, err := x.openSession(ctx, at, "Bearer "+x.revokedToken, "revoked-session-open", len(x.proxies) > 0); err == nil {
		x.revokedSession = &s.sessionRef
	} else {
		x.e.logf("chaos: hostile: the revoked tenant's session: %v", err)
	}
	if _, err := admin.RevokeTenantTokens(ctx, revokedTenant); err != nil {
		return fmt.Errorf("revoke %s: %w", revokedTenant, err)
	}
	// A revocation takes effect everywhere within a bound (issue 22, hole
	// 4: about a second); the attacks start after it.
	sleepCtx(ctx, 2*time.Second)
	return nil
}

// clusterState reads what checker h2 compares, with the admin token.
func clusterState(ctx context.Context, endpoints []string, adminToken string, keys []string) (check.ClusterState, error) {
	var st check.ClusterState
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints, AuthToken: adminToken, Direct: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return st, err
	}
	defer c.Close()
	ts, err := c.Tenants(ctx)
	if err != nil {
		return st, fmt.Errorf("tenants: %w", err)
	}
	for _, t := range ts.Tenants {
		st.Tenants = append(st.Tenants, fmt.Sprintf("%s %v tokens=%d", t.Name, t.Grants, t.Tokens))
	}
	if err := c.RefreshDirectory(ctx); err != nil {
		return st, fmt.Errorf("directory: %w", err)
	}
	d := c.Directory()
	for _, p := range d.Prefixes {
		st.Prefixes = append(st.Prefixes, p.Prefix)
	}
	for _, cell := range d.Cells {
		st.Cells = append(st.Cells, cell.Name)
	}
	var errs []error
	for _, p := range hostileCreated() {
		switch _, err := c.Get(ctx, p); {
		case err == nil:
			st.Exists = append(st.Exists, p)
		case !errors.Is(err, sdk.ErrNoNode):
			errs = append(errs, fmt.Errorf("get %s: %w", p, err))
		}
	}
	st.Values = map[string]string{}
	for _, k := range keys {
		if n, err := c.Get(ctx, k); err == nil {
			st.Values[k] = string(n.Value)
		}
	}
	slices.Sort(st.Tenants)
	return st, errors.Join(errs...)
}
