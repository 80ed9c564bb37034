package ctl

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/spf13/cobra"
)

func putCmd(g *globals) *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:     "put PATH VALUE",
		Example: "  lockctl put /demo/config '{\"replicas\": 3}'\n  lockctl put /demo/config v2 --version 4   (only if still at version 4)",
		Short:   "Write a persistent node's value (create or overwrite; CAS with --version)",
		Long: "Write VALUE to the persistent node PATH and print its new version.\n" +
			"With --version N the write is a compare-and-set on version N;\n" +
			"--version 0 means the node must not exist yet.",
		Args: exactArgs("PATH", "VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := []sdk.PutOption{sdk.MakeParents()}
			if cmd.Flags().Changed("version") {
				opts = append(opts, sdk.WithVersion(version))
			}
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				n, err := c.Put(ctx, args[0], []byte(args[1]), opts...)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), n)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "version: %d\n", n.Version)
				return err
			})
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "only write if the node is at this version (0: must not exist)")
	return cmd
}

func getCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "get PATH",
		Example: "  lockctl get /demo/config\n  lockctl get /demo/config -o json",
		Short:   "Print a node's value and version",
		Args:    exactArgs("PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				n, err := c.Get(ctx, args[0])
				if err != nil {
					return err
				}
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), n)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\nversion: %d\n", n.Value, n.Version)
				return err
			})
		},
	}
}

// lsOutput is ls's JSON output.
type lsOutput struct {
	Path     string   `json:"path"`
	Children []string `json:"children"`
	Node     api.Node `json:"node"`
}

func lsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "ls PATH",
		Example: "  lockctl ls /demo\n  lockctl ls /demo/locks/orders",
		Short:   "List a node's children, one per line",
		Args:    exactArgs("PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				kids, n, err := c.Children(ctx, args[0])
				if err != nil {
					return err
				}
				if g.output == "json" {
					if kids == nil {
						kids = []string{}
					}
					return writeJSON(cmd.OutOrStdout(), lsOutput{Path: args[0], Children: kids, Node: n})
				}
				for _, k := range kids {
					if _, err := fmt.Fprintln(cmd.OutOrStdout(), k); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

func rmCmd(g *globals) *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:     "rm PATH",
		Example: "  lockctl rm /demo/config",
		Short:   "Delete a childless node (only at --version N, if given)",
		Args:    exactArgs("PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []sdk.DeleteOption
			if cmd.Flags().Changed("version") {
				opts = append(opts, sdk.WithVersion(version))
			}
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				return c.Delete(ctx, args[0], opts...)
			})
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "only delete if the node is at this version")
	return cmd
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
	return &cobra.Command{
		Use:     "status",
		Example: "  lockctl status\n  lockctl status --endpoints 10.0.0.1:7001,10.0.0.2:7001 -o json",
		Short:   "Show every endpoint's view of its cells",
		Long: "Query /v1/status on every endpoint and print one row per cell replica,\n" +
			"then one row per lockproxy the directory lists (its clients and the\n" +
			"sessions it renews). An endpoint that does not answer gets a row saying\n" +
			"so; the command fails only if none answers.",
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			eps := g.endpointList()
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
			answered := 0
			for _, r := range rows {
				if r.Status != nil {
					answered++
				}
			}
			prows := proxyRows(ctx, g, rows)
			rows = append(dropProxies(rows, prows), prows...)
			var err error
			if g.output == "json" {
				err = writeJSON(cmd.OutOrStdout(), rows)
			} else {
				err = writeStatusTable(cmd, rows)
			}
			if err != nil {
				return err
			}
			if answered == 0 {
				return api.Errorf(api.CodeUnavailable, "no endpoint answered (%d tried: %s; is a cluster running? make run starts a local one)", len(eps), strings.Join(eps, ", "))
			}
			return nil
		},
	}
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

// codecColumn is a replica's log codec and the directory's floor as its
// lockd sees it ("1/1"), with the entries it applied above its cell's
// codec if any (a bug: "0/0 UNGATED 3").
func codecColumn(c api.ReplicaStatus, floor uint8) string {
	col := fmt.Sprintf("%d/%d", c.LogCodec, floor)
	if c.UngatedEntries > 0 {
		col += fmt.Sprintf(" UNGATED %d", c.UngatedEntries)
	}
	return col
}

func asAPIError(err error) *api.Error {
	if e, ok := err.(*api.Error); ok {
		return e
	}
	code := api.CodeOf(err)
	if code == "" {
		code = api.CodeInternal
	}
	return &api.Error{Code: code, Message: err.Error()}
}

func backupCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "backup CELL",
		Short: "Back up a cell now: its leader exports a snapshot to its backup store",
		Long: "Ask CELL's leader to export a snapshot of the cell to the backup store it was\n" +
			"started with (lockd serve --backup-dir) and print the backup's index, size,\n" +
			"digest and location. Restore it with lockctl restore and lockd restore\n" +
			"(see docs/design/backups.md).",
		Example: "  lockctl backup payments\n  lockctl backup payments -o json",
		Args:    exactArgs("CELL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				b, err := c.Backup(ctx, args[0])
				if err != nil {
					return err
				}
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), b)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "cell %s backed up by replica %d at index %d: %d bytes, sha256 %s\nlocation: %s\n",
					b.Cell, b.ReplicaID, b.Index, b.Bytes, b.SHA256, b.Location)
				return err
			})
		},
	}
}

func restoreCmd(g *globals) *cobra.Command {
	var (
		index uint64
		on    string
	)
	cmd := &cobra.Command{
		Use:   "restore CELL --index N [--on LOCKDS]",
		Short: "Plan the rebuild of a cell from a backup, on new replicas (disaster recovery)",
		Long: "Record in the directory that CELL is rebuilt from its backup at index N (as\n" +
			"lockctl backup printed it) on new replicas: on exactly the lockds in --on, or\n" +
			"placed by the usual rules. The directory raises the epoch of each of the cell's\n" +
			"prefixes, so tokens of the restored cell compare above every token of the lost\n" +
			"one. The old replicas stop as soon as their lockds read the plan. Then, on\n" +
			"each planned lockd: stop it, run lockd restore, start it (see docs/design/backups.md).\n" +
			"Planning again supersedes the plan, and its imports must be done again.",
		Example: "  lockctl restore payments --index 812345 --on 4,5,6\n" +
			"  lockctl restore payments --index 812345 -o json > plan.json   # for lockd restore --plan",
		Args: exactArgs("CELL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if index == 0 {
				return usagef("restore needs --index: the index of the backup to restore (lockctl backup prints it; it names the backup's directory in the store)")
			}
			ids, err := lockdIDs(on)
			if err != nil {
				return err
			}
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				plan, err := c.RestoreCell(ctx, api.RestoreCellRequest{Cell: args[0], BackupIndex: index, On: ids})
				if err != nil {
					return err
				}
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), plan)
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "restore of cell %s from the backup at index %d planned:\n", plan.Cell, plan.BackupIndex)
				for _, r := range plan.Replicas {
					fmt.Fprintf(w, "  lockd %d (raft %s): replica %d\n", r.Lockd, r.RaftAddr, r.ReplicaID)
				}
				prefixes := make([]string, 0, len(plan.Epochs))
				for p := range plan.Epochs {
					prefixes = append(prefixes, p)
				}
				sort.Strings(prefixes)
				for _, p := range prefixes {
					fmt.Fprintf(w, "  prefix %s: epoch %d\n", p, plan.Epochs[p])
				}
				// The directory's prefixes, not the backup's: any other
				// prefix of the backup is dropped before the cell serves.
				fmt.Fprintf(w, "  it serves only these prefixes; its leader epochs start at %d\n", plan.LeaderEpochFloor)
				_, err = fmt.Fprintf(w, "next, on each of those lockds: stop it, run\n"+
					"  lockd restore --cell-name %s --from BACKUP_DIR <its lockd serve flags>\n"+
					"and start it again; the cell serves once a majority is restored.\n", plan.Cell)
				return err
			})
		},
	}
	cmd.Flags().Uint64Var(&index, "index", 0, "the index of the backup to restore (required)")
	cmd.Flags().StringVar(&on, "on", "", "the lockd ids to restore the cell on (comma-separated; default: placed)")
	return cmd
}
