package ctl

// lockctl txn: a transaction from flags or from lines on stdin.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// maxTxnLines bounds the lines lockctl txn reads from stdin (writes,
// conditions, blanks and comments).
const maxTxnLines = 4 * (api.MaxTxnOps + api.MaxTxnConds)

const txnLong = `Commit a few writes on one cell together, only if every condition holds
(all or nothing, one log entry). Each --if and --then is one line of the
format below; without any --then, the lines are read from stdin (blank
lines and lines starting with # are skipped):

  if holds DIR TOKEN       the fencing token TOKEN holds the lock DIR
  if version PATH N        the node PATH is at version N
  if missing PATH          no node at PATH
  if exists PATH           a node at PATH
  put PATH VALUE           write VALUE (the rest of the line) at PATH
  put@N PATH VALUE         the same, only at version N (0: must not exist)
  create PATH [VALUE]      create a persistent node
  delete PATH              delete a childless node

Writes create missing parents, as lockctl put does ("if exists PARENT"
refuses instead). With --if and --then the leading "if" is left out. A
refused transaction applies nothing and names the condition or write that
failed.`

func txnCmd(g *globals) *cobra.Command {
	var conds, ops []string
	cmd := &cobra.Command{
		Use:     "txn [--if COND]... [--then WRITE]...",
		Example: "  lockctl txn --if 'holds /demo/locks/job 4294967301' --then 'put /demo/job/state done'\n  printf 'if missing /demo/a\\ncreate /demo/a 1\\nput /demo/count 7\\n' | lockctl txn",
		Short:   "Commit writes together if conditions hold (a transaction)",
		Long:    txnLong,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			lines := make([]string, 0, len(conds)+len(ops))
			for _, c := range conds {
				lines = append(lines, "if "+c)
			}
			lines = append(lines, ops...)
			if len(ops) == 0 {
				more, err := readTxnLines(cmd.InOrStdin())
				if err != nil {
					return err
				}
				lines = append(lines, more...)
			}
			req, err := parseTxn(lines)
			if err != nil {
				return usagef("%v", err)
			}
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				res, err := c.Txn(ctx).If(req.If...).Then(req.Then...).Commit(ctx)
				if err != nil {
					return err
				}
				return printTxn(cmd.OutOrStdout(), g.output, res)
			})
		},
	}
	cmd.Flags().StringArrayVar(&conds, "if", nil, "a condition: 'holds DIR TOKEN', 'version PATH N', 'missing PATH' or 'exists PATH'")
	cmd.Flags().StringArrayVar(&ops, "then", nil, "a write: 'put PATH VALUE', 'put@N PATH VALUE', 'create PATH [VALUE]', 'create+ PATH [VALUE]' or 'delete PATH'")
	return cmd
}

// readTxnLines reads the lines of a transaction, at most maxTxnLines.
func readTxnLines(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), api.MaxRequestBody)
	var lines []string
	for sc.Scan() {
		if len(lines) == maxTxnLines {
			return nil, usagef("over %d lines on stdin", maxTxnLines)
		}
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// parseTxn parses the lines of a transaction (txnLong).
func parseTxn(lines []string) (api.TxnRequest, error) {
	var req api.TxnRequest
	for n, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var err error
		if rest, ok := strings.CutPrefix(line, "if "); ok {
			var c api.TxnCond
			c, err = parseTxnCond(strings.TrimSpace(rest))
			req.If = append(req.If, c)
		} else {
			var o api.TxnOp
			o, err = parseTxnOp(line)
			req.Then = append(req.Then, o)
		}
		if err != nil {
			return req, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
	}
	return req, nil
}

func parseTxnCond(s string) (api.TxnCond, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return api.TxnCond{}, fmt.Errorf("a condition is 'KIND PATH [N]'")
	}
	c := api.TxnCond{If: api.TxnCondKind(f[0]), Path: f[1]}
	want := 2
	var err error
	switch c.If {
	case api.CondHolds:
		want = 3
		if len(f) == 3 {
			c.Token, err = strconv.ParseUint(f[2], 10, 64)
		}
	case api.CondVersion:
		want = 3
		if len(f) == 3 {
			c.Version, err = strconv.ParseUint(f[2], 10, 64)
		}
	case api.CondMissing, api.CondExists:
	default:
		return c, fmt.Errorf("unknown condition %q (holds, version, missing, exists)", f[0])
	}
	if len(f) != want || err != nil {
		if err != nil {
			return c, fmt.Errorf("%s takes %d fields (%v)", c.If, want, err)
		}
		return c, fmt.Errorf("%s takes %d fields", c.If, want)
	}
	return c, nil
}

func parseTxnOp(s string) (api.TxnOp, error) {
	kind, rest, _ := strings.Cut(s, " ")
	path, value, hasValue := strings.Cut(strings.TrimSpace(rest), " ")
	if path == "" {
		return api.TxnOp{}, fmt.Errorf("a write is 'KIND PATH [VALUE]'")
	}
	switch {
	case kind == "put":
		return sdk.PutOp(path, []byte(value)), nil
	case strings.HasPrefix(kind, "put@"):
		v, err := strconv.ParseUint(strings.TrimPrefix(kind, "put@"), 10, 64)
		if err != nil {
			return api.TxnOp{}, fmt.Errorf("put@N: %v", err)
		}
		o := sdk.PutOp(path, []byte(value))
		o.Version = &v
		return o, nil
	case kind == "create" || kind == "create+": // create+ is the default now, kept for old scripts
		return sdk.CreateOp(path, []byte(value)), nil
	case kind == "delete" && !hasValue:
		return sdk.DeleteOp(path), nil
	}
	return api.TxnOp{}, fmt.Errorf("unknown write %q (put, put@N, create, create+, delete PATH)", kind)
}

// txnOutput is txn's JSON output: sdk.TxnResult in snake_case.
type txnOutput struct {
	Index uint64     `json:"index"`
	Nodes []api.Node `json:"nodes"`
}

func printTxn(w io.Writer, output string, res sdk.TxnResult) error {
	if output == "json" {
		return writeJSON(w, txnOutput{Index: res.Index, Nodes: res.Nodes})
	}
	if _, err := fmt.Fprintf(w, "committed at index %d\n", res.Index); err != nil {
		return err
	}
	for _, n := range res.Nodes {
		if _, err := fmt.Fprintf(w, "%s version %d\n", n.Path, n.Version); err != nil {
			return err
		}
	}
	return nil
}
