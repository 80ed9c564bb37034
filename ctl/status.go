package ctl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// statusReport is what status -o json prints: the cluster's health as
// the first endpoint that could assess it answered (or why none could),
// then every endpoint's and lockproxy's status.
type statusReport struct {
	Health      *api.ClusterHealth `json:"health,omitempty"`
	HealthError *api.Error         `json:"health_error,omitempty"`
	Endpoints   []statusRow        `json:"endpoints"`
}

// statusRow is one endpoint's answer, as status -o json prints it.
type statusRow struct {
	Endpoint string              `json:"endpoint"`
	Status   *api.StatusResponse `json:"status,omitempty"`
	// Proxy is set on the rows of the lockproxies the directory lists.
	Proxy *api.ProxyStatus `json:"proxy,omitempty"`
	Error *api.Error       `json:"error,omitempty"`
}

func statusCmd(g *globals) *cobra.Command {
	var failOn string
	cmd := &cobra.Command{
		Use:     "status",
		Example: "  lockctl status\n  lockctl status --endpoints 10.0.0.1:7001,10.0.0.2:7001 -o json\n  lockctl status --fail-on critical   (exit 3 if a cell is critical: for a probe)",
		Short:   "Show what is wrong first, then every endpoint's view of its cells",
		Long: "Ask the cluster to assess itself (GET /v1/status/health: the same\n" +
			"reasons the status page shows) and print its problems, worst first,\n" +
			"or that there are none. Then query /v1/status on every endpoint and\n" +
			"print one row per cell replica, then one row per lockproxy the\n" +
			"directory lists (its clients and the sessions it renews). An endpoint\n" +
			"that does not answer gets a row saying so; the command fails only if\n" +
			"none answers. -o json prints {\"health\", \"health_error\", \"endpoints\"}\n" +
			"(docs/lockctl.md). With --fail-on LEVEL it exits 3 when the health is\n" +
			"LEVEL or worse, or could not be assessed.",
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			threshold, err := parseFailOn(failOn)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			eps := g.endpointList()
			var rep statusReport
			var wg sync.WaitGroup
			wg.Go(func() { rep.Health, rep.HealthError = fetchHealth(ctx, g, eps) })
			wg.Go(func() { rep.Endpoints = statusRows(ctx, g, eps) })
			wg.Wait()
			answered := 0
			for _, r := range rep.Endpoints {
				if r.Status != nil {
					answered++
				}
			}
			prows := proxyRows(ctx, g, rep.Endpoints)
			rep.Endpoints = append(dropProxies(rep.Endpoints, prows), prows...)
			if g.output == "json" {
				err = writeJSON(cmd.OutOrStdout(), rep)
			} else if err = writeHealth(cmd.OutOrStdout(), rep); err == nil {
				err = writeStatusTable(cmd, rep.Endpoints)
			}
			if err != nil {
				return err
			}
			if answered == 0 {
				return api.Errorf(api.CodeUnavailable, "no endpoint answered (%d tried: %s; is a cluster running? make run starts a local one)", len(eps), strings.Join(eps, ", "))
			}
			return failHealth(cmd, rep.Health, threshold)
		},
	}
	cmd.Flags().StringVar(&failOn, "fail-on", "", "exit 3 when the cluster's health is this level or worse (degraded, critical), or unknown")
	return cmd
}

// statusRows asks every endpoint for its status at once.
func statusRows(ctx context.Context, g *globals, eps []string) []statusRow {
	rows := make([]statusRow, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() {
			rows[i].Endpoint = ep
			st, err := sdk.FetchStatus(ctx, ep, g.access())
			if err != nil {
				rows[i].Error = asAPIError(err)
				return
			}
			rows[i].Status = &st
		})
	}
	wg.Wait()
	return rows
}

// proxyRows reads the directory from the first endpoint that answered
// and the status of every lockproxy it lists.
func proxyRows(ctx context.Context, g *globals, rows []statusRow) []statusRow {
	var dir api.DirectoryResponse
	found := false
	for _, r := range rows {
		if r.Error == nil {
			if d, err := sdk.FetchDirectory(ctx, r.Endpoint, g.access()); err == nil {
				dir, found = d, true
				break
			}
		}
	}
	if !found {
		return nil
	}
	out := make([]statusRow, len(dir.Proxies))
	var wg sync.WaitGroup
	for i, p := range dir.Proxies {
		wg.Go(func() {
			out[i].Endpoint = p.APIAddr
			st, err := sdk.FetchProxyStatus(ctx, p.APIAddr, g.access())
			if err != nil {
				out[i].Error = asAPIError(err)
				out[i].Proxy = &api.ProxyStatus{Proxy: p}
				return
			}
			out[i].Proxy = &st
		})
	}
	wg.Wait()
	return out
}

// dropProxies removes the rows of endpoints that are proxies (given in
// --endpoints): their status is not a replica's, and they are listed with
// the proxies.
func dropProxies(rows, proxies []statusRow) []statusRow {
	var out []statusRow
	for _, r := range rows {
		if !slices.ContainsFunc(proxies, func(p statusRow) bool { return p.Endpoint == r.Endpoint }) {
			out = append(out, r)
		}
	}
	return out
}

func writeStatusTable(cmd *cobra.Command, rows []statusRow) error {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tCELL\tREPLICA\tROLE\tLEADER\tTERM\tAPPLIED\tEPOCH\tCODEC")
	var proxies []statusRow
	for _, r := range rows {
		if r.Proxy != nil {
			proxies = append(proxies, r)
			continue
		}
		switch {
		case r.Error != nil && r.Error.Code == api.CodeUnavailable:
			fmt.Fprintf(tw, "%s\t-\t-\tunreachable\t-\t-\t-\t-\t-\n", r.Endpoint)
		case r.Error != nil:
			fmt.Fprintf(tw, "%s\t-\t-\terror: %s\t-\t-\t-\t-\t-\n", r.Endpoint, r.Error.Code)
		case len(r.Status.Cells) == 0:
			fmt.Fprintf(tw, "%s\t-\t%d\tno cells\t-\t-\t-\t-\t-\n", r.Endpoint, r.Status.ReplicaID)
		default:
			for _, c := range r.Status.Cells {
				leader := c.LeaderAPI
				if leader == "" && c.LeaderID != 0 {
					leader = fmt.Sprintf("replica %d", c.LeaderID)
				}
				if leader == "" {
					leader = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\n", r.Endpoint, c.Cell, c.ReplicaID, c.Role, leader, c.Term, c.AppliedIndex, c.Epoch, codecColumn(c, r.Status.LogCodecFloor))
			}
		}
	}
	if err := tw.Flush(); err != nil || len(proxies) == 0 {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout())
	tw = tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROXY\tENDPOINT\tZONE\tCLIENTS\tSESSIONS\tCELLS")
	for _, r := range proxies {
		p := r.Proxy
		if r.Error != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\tunreachable\t-\t-\n", p.Proxy.Name, r.Endpoint, p.Proxy.Zone)
			continue
		}
		var cells []string
		for _, c := range p.Cells {
			cells = append(cells, fmt.Sprintf("%s:%d", c.Cell, c.Sessions))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", p.Proxy.Name, r.Endpoint, p.Proxy.Zone, p.Clients, p.Sessions, strings.Join(cells, ","))
	}
	return tw.Flush()
}
