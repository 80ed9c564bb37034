package ctl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// cellsCmd lists the cells and where their replicas are.
func cellsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "cells",
		Example: "  lockctl cells\n  lockctl cells -o json",
		Short:   "List the cells: shard, prefixes and the lockds (and zones) of their replicas",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if err := c.RefreshDirectory(ctx); err != nil {
					return err
				}
				d := c.Directory()
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), d)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "CELL\tSHARD\tPREFIXES\tREPLICAS (lockd/zone)\tTIMING\n")
				for _, cell := range append([]api.CellInfo{d.Directory}, d.Cells...) {
					timing := "default"
					if cell.Timing != nil {
						timing = cell.Timing.String()
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", cell.Name, cell.ShardID, orDash(strings.Join(cell.Prefixes, ",")), replicaList(cell), timing)
				}
				fmt.Fprintf(tw, "(directory index %d, %d lockds)\n", d.Index, len(d.Lockds))
				return tw.Flush()
			})
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cellCmd groups the cell administration commands.
func cellCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cell", Short: "Create cells", Example: "  lockctl cell create orders"}
	cmd.AddCommand(cellCreateCmd(g))
	return cmd
}

// cellCreateCmd is `lockctl cell create`.
func cellCreateCmd(g *globals) *cobra.Command {
	var replicas int
	var on, timing string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a cell: a new Raft group placed over the lockds",
		Long: "Create the cell NAME. The directory places its replicas: never two on one lockd,\n" +
			"spread over zones, least loaded lockds first; or on exactly the lockds in --on.\n" +
			"Give it prefixes with lockctl prefix assign. A cell whose replicas are far apart\n" +
			"(a small global cell across regions) takes its own --timing: a slower heartbeat,\n" +
			"elections of seconds and a longer lease; its clients learn it at session open.",
		Example: "  lockctl cell create orders\n  lockctl cell create orders --replicas 3 --on 1,4,6\n" +
			"  lockctl cell create global --timing heartbeat=500ms,election=5s,lease=30s,keepalive=10s,grace=2m",
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.CreateCellRequest{Name: args[0]}
			if cmd.Flags().Changed("replicas") || on == "" {
				req.Replicas = replicas
			}
			var err error
			if req.On, err = lockdIDs(on); err != nil {
				return err
			}
			if timing != "" {
				t, err := api.ParseCellTiming(timing)
				if err != nil {
					return usagef("--timing: %v", err)
				}
				req.Timing = &t
			}
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				return g.printCell(cmd, "created", func() (api.CellInfo, error) { return c.CreateCell(ctx, req) })
			})
		},
	}
	create.Flags().IntVar(&replicas, "replicas", 5, "replicas (5, or 3)")
	create.Flags().StringVar(&on, "on", "", "place the replicas on exactly these lockd ids (comma-separated)")
	create.Flags().StringVar(&timing, "timing", "", "the cell's own timing, any of heartbeat=D,election=D,lease=D,keepalive=D,grace=D (default: the lockds')")
	return create
}

// lockdIDs parses --on: comma-separated lockd ids ("" → none).
func lockdIDs(on string) ([]uint64, error) {
	if on == "" {
		return nil, nil
	}
	var out []uint64
	for _, f := range strings.Split(on, ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil || id == 0 {
			return nil, usagef("--on takes lockd ids like 1,4,6; %q is not one", f)
		}
		out = append(out, id)
	}
	return out, nil
}

// prefixCmd groups the prefix commands.
func prefixCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "prefix", Short: "Assign and show top-level prefixes", Example: "  lockctl prefix assign /orders orders\n  lockctl prefix show /orders"}
	cmd.AddCommand(prefixAssignCmd(g), prefixShowCmd(g))
	return cmd
}

// prefixAssignCmd is `lockctl prefix assign`.
func prefixAssignCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "assign PREFIX CELL",
		Short:   "Give an unassigned prefix to a cell (a served one moves with lockctl migrate)",
		Example: "  lockctl prefix assign /orders orders",
		Args:    exactArgs("PREFIX", "CELL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				p, err := c.AssignPrefix(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), p)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s → cell %s (epoch %d)\n", p.Prefix, p.Cell, p.Epoch)
				return err
			})
		},
	}
}

// prefixShowCmd is `lockctl prefix show`.
func prefixShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "show PREFIX",
		Example: "  lockctl prefix show /payments",
		Short:   "Show the cell serving a prefix, its epoch, and any migration in flight",
		Args:    exactArgs("PREFIX"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if err := c.RefreshDirectory(ctx); err != nil {
					return err
				}
				p, ok := c.Directory().Prefix(args[0])
				if !ok {
					return api.Errorf(api.CodeNotFound, "no prefix %s in the directory", args[0])
				}
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), p)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s → cell %s (epoch %d)\n", p.Prefix, p.Cell, p.Epoch)
				if m := p.Migration; m != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "migration %s → %s: %s (begun at directory index %d)\n", m.From, m.To, m.Phase, m.BeganAt)
				}
				return nil
			})
		},
	}
}

// migrateCmd moves a prefix to another cell.
func migrateCmd(g *globals) *cobra.Command {
	var to string
	var abort, takeOver bool
	cmd := &cobra.Command{
		Use:   "migrate PREFIX --to CELL",
		Short: "Move a prefix to another cell (resumes one in flight; --abort abandons it)",
		Long: "Move PREFIX to CELL: the old cell seals the prefix (writes under it are refused\n" +
			"with moved, its locks are released), its persistent nodes are copied with their\n" +
			"values and versions, the directory commits the move with the epoch + 1 (tokens\n" +
			"issued after it compare above every earlier one), and the new cell serves.\n" +
			"One lockctl drives a migration at a time: another is refused (migration_in_progress)\n" +
			"while it runs. If it died (a crash, a kill), take its migration over with\n" +
			"--take-over: the copy starts again, and should it still be running it stops at its\n" +
			"next step. Once committed, running it again finishes it. --abort abandons one\n" +
			"that has not committed (the old cell serves again).",
		Example: "  lockctl migrate /payments --to cell3\n  lockctl migrate /payments --to cell3 --take-over\n  lockctl migrate /payments --abort",
		Args:    exactArgs("PREFIX"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if abort == (to != "") || abort && takeOver {
				return usagef("give --to CELL (with --take-over to take a migration in flight over), or --abort")
			}
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				out := cmd.OutOrStdout()
				if abort {
					if err := c.AbortMove(ctx, args[0]); err != nil {
						return err
					}
					if g.output == "json" {
						return g.printPrefix(ctx, c, out, args[0])
					}
					_, err := fmt.Fprintf(out, "migration of %s aborted: its old cell serves it\n", args[0])
					return err
				}
				start := time.Now()
				var opts []sdk.MoveOption
				if takeOver {
					opts = append(opts, sdk.TakeOver())
				}
				res, err := c.MovePrefix(ctx, args[0], to, func(p sdk.MoveProgress) {
					if g.output != "json" {
						fmt.Fprintf(out, "[%6.2fs] %-9s %s", time.Since(start).Seconds(), p.Step, p.Detail)
						if p.Step == "copying" {
							fmt.Fprintf(out, "%d nodes", p.Nodes)
						}
						fmt.Fprintln(out)
					}
				}, opts...)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return writeJSON(out, moveOutputOf(res))
				}
				_, err = fmt.Fprintf(out, "%s moved from %s to %s at epoch %d: %d nodes, writes refused for %v, %v in all\n",
					res.Prefix, res.From, res.To, res.Epoch, res.Nodes, res.Refusing.Round(time.Millisecond), res.Total.Round(time.Millisecond))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the cell to move the prefix to")
	cmd.Flags().BoolVar(&abort, "abort", false, "abandon the migration of PREFIX in flight (refused once committed)")
	cmd.Flags().BoolVar(&takeOver, "take-over", false, "take over the migration of PREFIX to CELL that another lockctl drives (it died, or it stops at its next step)")
	return cmd
}

// moveOutput is migrate's JSON output: sdk.MoveResult in the snake_case
// of every other output, its durations in milliseconds.
type moveOutput struct {
	Prefix     string  `json:"prefix"`
	From       string  `json:"from"`
	To         string  `json:"to"`
	Epoch      uint64  `json:"epoch"`
	Nodes      int     `json:"nodes"`
	SealIndex  uint64  `json:"seal_index"`
	RefusingMS float64 `json:"refusing_ms"`
	TotalMS    float64 `json:"total_ms"`
}

func moveOutputOf(r sdk.MoveResult) moveOutput {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return moveOutput{Prefix: r.Prefix, From: r.From, To: r.To, Epoch: r.Epoch, Nodes: r.Nodes,
		SealIndex: r.SealIndex, RefusingMS: ms(r.Refusing), TotalMS: ms(r.Total)}
}

// printPrefix prints prefix's entry in c's directory as JSON (as prefix
// show -o json does): migrate --abort's output.
func (g *globals) printPrefix(ctx context.Context, c *sdk.Client, w io.Writer, prefix string) error {
	if err := c.RefreshDirectory(ctx); err != nil {
		return err
	}
	p, ok := c.Directory().Prefix(prefix)
	if !ok {
		return api.Errorf(api.CodeNotFound, "no prefix %s in the directory", prefix)
	}
	return writeJSON(w, p)
}

// memberCmd changes a cell's membership, one replica at a time.
func memberCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "member",
		Example: "  lockctl member add payments 6 --learner\n  lockctl member promote payments 6\n  lockctl member remove payments 2",
		Short:   "Replace a cell's replicas: add (--learner), promote, remove",
		Long: "Change one cell's membership, one replica at a time. To replace a dead replica:\n" +
			"  lockctl member add CELL NEW-LOCKD --learner   (it catches up from a snapshot)\n" +
			"  lockctl member promote CELL NEW-LOCKD\n" +
			"  lockctl member remove CELL DEAD-LOCKD\n" +
			"A change that would leave the cell fewer than three voters, put two of its\n" +
			"replicas on one lockd, or that the cell cannot commit is refused and changes nothing.",
	}
	cmd.AddCommand(memberAddCmd(g),
		&cobra.Command{Use: "promote CELL LOCKD", Short: "Give CELL's learner on lockd LOCKD a vote", Example: "  lockctl member promote payments 6", Args: exactArgs("CELL", "LOCKD"), RunE: memberRun(g, api.MemberPromote, new(bool))},
		&cobra.Command{Use: "remove CELL LOCKD", Short: "Remove CELL's replica on lockd LOCKD", Example: "  lockctl member remove payments 2", Args: exactArgs("CELL", "LOCKD"), RunE: memberRun(g, api.MemberRemove, new(bool))})
	return cmd
}

// memberAddCmd is `lockctl member add`.
func memberAddCmd(g *globals) *cobra.Command {
	var learner bool
	add := &cobra.Command{Use: "add CELL LOCKD", Short: "Add a replica of CELL on lockd LOCKD", Example: "  lockctl member add payments 6 --learner", Args: exactArgs("CELL", "LOCKD"), RunE: memberRun(g, api.MemberAdd, &learner)}
	add.Flags().BoolVar(&learner, "learner", false, "add it without a vote: it catches up first (then member promote)")
	return add
}

// memberRun runs `lockctl member ACTION CELL LOCKD`; learner is --learner
// (add's flag; false for the others).
func memberRun(g *globals, action string, learner *bool) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		id, err := strconv.ParseUint(args[1], 10, 64)
		if err != nil || id == 0 {
			return usagef("LOCKD is a lockd id like 6, not %q", args[1])
		}
		return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
			return g.printCell(cmd, fmt.Sprintf("%s of lockd %d done", action, id), func() (api.CellInfo, error) {
				return c.ChangeMember(ctx, api.MemberRequest{Cell: args[0], Action: action, Lockd: id, Learner: *learner})
			})
		})
	}
}

// printCell runs op and prints the cell it returns: "cell NAME WHAT:
// shard N, replicas on lockd 1 (zone), …".
func (g *globals) printCell(cmd *cobra.Command, what string, op func() (api.CellInfo, error)) error {
	info, err := op()
	if err != nil {
		return err
	}
	if g.output == "json" {
		return writeJSON(cmd.OutOrStdout(), info)
	}
	timing := ""
	if info.Timing != nil {
		timing = ", timing " + info.Timing.String()
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "cell %s %s: shard %d, replicas (lockd/zone) %s%s\n", info.Name, what, info.ShardID, replicaList(info), timing)
	return err
}

// replicaList is a cell's replicas as "1/z1 2/z2 6/z3(learner)".
func replicaList(cell api.CellInfo) string {
	reps := make([]string, 0, len(cell.Replicas))
	for _, r := range cell.Replicas {
		s := fmt.Sprintf("%d/%s", r.Lockd, orDash(r.Zone))
		if r.Learner {
			s += "(learner)"
		}
		reps = append(reps, s)
	}
	return strings.Join(reps, " ")
}
