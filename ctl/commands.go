package ctl

import (
	"context"
	"fmt"
	"sort"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/spf13/cobra"
)

func putCmd(g *globals) *cobra.Command {
	var version uint64
	var noParents bool
	cmd := &cobra.Command{
		Use:     "put PATH VALUE",
		Example: "  lockctl put /demo/config '{\"replicas\": 3}'\n  lockctl put /demo/config v2 --version 4   (only if still at version 4)",
		Short:   "Write a persistent node's value (create or overwrite; CAS with --version)",
		Long: "Write VALUE to the persistent node PATH and print its new version.\n" +
			"Missing parents are created (as the SDK's Put does); --no-parents\n" +
			"refuses instead (no_node). With --version N the write is a\n" +
			"compare-and-set on version N; --version 0 means the node must not\n" +
			"exist yet.",
		Args: exactArgs("PATH", "VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := []sdk.PutOption{sdk.MakeParents()}
			if noParents {
				opts = []sdk.PutOption{sdk.NoParents()}
			}
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
	cmd.Flags().BoolVar(&noParents, "no-parents", false, "fail with no_node if the parent does not exist, instead of creating it")
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
