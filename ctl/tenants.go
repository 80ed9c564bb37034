package ctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// tenantCmd groups the tenant commands (admin only).
func tenantCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tenant", Short: "Manage tenants: their prefixes and roles, quotas and API tokens (admin)",
		Example: "  lockctl tenant put payments --grant /payments=write,lock --new-token\n  lockctl tenant list"}
	revoke := tenantChange(g, "revoke", "Revoke every API token of a tenant", "tokens revoked", (*sdk.Client).RevokeTenantTokens)
	del := tenantChange(g, "delete", "Delete a tenant and its tokens", "deleted", (*sdk.Client).DeleteTenant)
	cmd.AddCommand(tenantPutCmd(g), tenantTokenCmd(g), revoke, del, tenantListCmd(g))
	return cmd
}

// tenantPutCmd is `lockctl tenant put`.
func tenantPutCmd(g *globals) *cobra.Command {
	var (
		grants   []string
		quota    api.Quota
		newToken bool
	)
	put := &cobra.Command{
		Use:   "put NAME --grant PREFIX=ROLE[,ROLE]...",
		Short: "Create a tenant or replace its grants and quota (its tokens are kept)",
		Long: "Roles: read (get, children, watches, lock state), write (read, and create, put, delete),\n" +
			"lock (read, and lock nodes: Mutex, Election; only its own sessions' nodes), admin (everything;\n" +
			"on / also the cluster's operations). Quotas hold per cell; 0 takes the default.\n" +
			"--new-token prints a new API token once: the service keeps only its digest.",
		Example: "  lockctl tenant put payments --grant /payments=write,lock --new-token\n" +
			"  lockctl tenant put audit --grant /payments=read --grant /orders=read --sessions 100",
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tenantOf(args[0], grants, quota)
			if err != nil {
				return err
			}
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				resp, err := c.PutTenant(ctx, t, newToken)
				if err != nil {
					return err
				}
				return printTenant(g, cmd, "stored", resp)
			})
		},
	}
	put.Flags().StringArrayVar(&grants, "grant", nil, "PREFIX=ROLE[,ROLE] (repeat)")
	put.Flags().IntVar(&quota.Sessions, "sessions", 0, "sessions per cell (0: default)")
	put.Flags().IntVar(&quota.Nodes, "nodes", 0, "nodes per cell (0: default)")
	put.Flags().Int64Var(&quota.Bytes, "bytes", 0, "bytes of paths and values per cell (0: default)")
	put.Flags().IntVar(&quota.Watches, "watches", 0, "watches per session (0: default)")
	put.Flags().IntVar(&quota.WritesPerSec, "writes-per-sec", 0, "writes per second per lockd (0: default)")
	put.Flags().BoolVar(&newToken, "new-token", false, "also make an API token and print it")
	return put
}

// tenantOf is the tenant `lockctl tenant put` stores: name, its --grant
// flags parsed, and quota; a usage error if it is not valid.
func tenantOf(name string, grants []string, quota api.Quota) (api.Tenant, error) {
	t := api.Tenant{Name: name, Quota: quota}
	for _, s := range grants {
		gr, err := parseGrant(s)
		if err != nil {
			return api.Tenant{}, err
		}
		t.Grants = append(t.Grants, gr)
	}
	if err := t.Validate(); err != nil {
		return api.Tenant{}, &usageError{api.AsError(err)}
	}
	return t, nil
}

// tenantTokenCmd is `lockctl tenant token`.
func tenantTokenCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "token NAME",
		Short:   "Make another API token for a tenant (printed once)",
		Example: "  lockctl tenant token payments",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				// The tenant as the directory stores it: its own quota, not
				// the effective one tenant list shows (which would pin
				// today's defaults into it).
				if err := c.RefreshDirectory(ctx); err != nil {
					return err
				}
				for _, t := range c.Directory().Tenants {
					if t.Name == args[0] {
						resp, err := c.PutTenant(ctx, api.Tenant{Name: t.Name, Grants: t.Grants, Quota: t.Quota}, true)
						if err != nil {
							return err
						}
						return printTenant(g, cmd, "token made", resp)
					}
				}
				return api.Errorf(api.CodeNotFound, "no tenant %q", args[0])
			})
		},
	}
}

// tenantListCmd is `lockctl tenant list`.
func tenantListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the tenants: grants, effective quotas, token counts",
		Example: "  lockctl tenant list",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				resp, err := c.Tenants(ctx)
				if err != nil {
					return err
				}
				return printTenants(g, cmd, resp)
			})
		},
	}
}

// printTenants prints `lockctl tenant list`: JSON, or a line per tenant.
func printTenants(g *globals, cmd *cobra.Command, resp api.TenantsResponse) error {
	if g.output == "json" {
		return writeJSON(cmd.OutOrStdout(), resp)
	}
	w := cmd.OutOrStdout()
	if !resp.Auth {
		fmt.Fprintln(w, "note: this cluster does not require tokens (lockd --admin-token-file turns it on)")
	}
	for _, t := range resp.Tenants {
		q := t.Quota
		fmt.Fprintf(w, "%s\tgrants %s\ttokens %d\tquota sessions %d nodes %d bytes %d watches %d writes/s %d\n",
			t.Name, grantList(t.Grants), t.Tokens, q.Sessions, q.Nodes, q.Bytes, q.Watches, q.WritesPerSec)
	}
	return nil
}

// tenantChange is a command NAME that makes one change to a tenant.
func tenantChange(g *globals, use, short, done string, change func(*sdk.Client, context.Context, string) (api.TenantResponse, error)) *cobra.Command {
	return &cobra.Command{
		Use:     use + " NAME",
		Short:   short,
		Example: "  lockctl tenant " + use + " payments",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				resp, err := change(c, ctx, args[0])
				if err != nil {
					return err
				}
				return printTenant(g, cmd, done, resp)
			})
		},
	}
}

// parseGrant reads PREFIX=ROLE[,ROLE].
func parseGrant(s string) (api.Grant, error) {
	prefix, roles, ok := strings.Cut(s, "=")
	if !ok || prefix == "" || roles == "" {
		return api.Grant{}, usagef("--grant takes PREFIX=ROLE[,ROLE], like /payments=write,lock; not %q", s)
	}
	g := api.Grant{Prefix: prefix}
	for _, r := range strings.Split(roles, ",") {
		g.Roles = append(g.Roles, api.Role(strings.TrimSpace(r)))
	}
	return g, nil
}

func grantList(gs []api.Grant) string {
	if len(gs) == 0 {
		return "-"
	}
	out := make([]string, len(gs))
	for i, g := range gs {
		roles := make([]string, len(g.Roles))
		for j, r := range g.Roles {
			roles[j] = string(r)
		}
		out[i] = g.Prefix + "=" + strings.Join(roles, ",")
	}
	return strings.Join(out, " ")
}

func printTenant(g *globals, cmd *cobra.Command, what string, resp api.TenantResponse) error {
	if g.output == "json" {
		return writeJSON(cmd.OutOrStdout(), resp)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "tenant %s %s: grants %s\n", resp.Tenant.Name, what, grantList(resp.Tenant.Grants))
	if resp.Token != "" {
		fmt.Fprintf(w, "token (shown once; keep it secret): %s\n", resp.Token)
	}
	return nil
}
