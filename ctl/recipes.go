package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// Codes lockctl reports for outcomes that are not server errors.
const (
	codeLockTimeout api.Code = "lock_timeout"
	codeLockLost    api.Code = "lock_lost"
	codeNoLeader    api.Code = "no_leader"
)

// killGrace is how long a COMMAND gets between SIGTERM and SIGKILL.
const killGrace = 10 * time.Second

// exitStatusError carries COMMAND's exit status out of lockctl lock; Main
// prints nothing for it.
type exitStatusError struct{ code int }

func (e *exitStatusError) Error() string { return fmt.Sprintf("command exited with status %d", e.code) }

// withLongClient is withClient for commands that run until interrupted: the
// global --timeout bounds connecting, not the command.
func (g *globals) withLongClient(cmd *cobra.Command, fn func(ctx context.Context, c *sdk.Client) error) error {
	cctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	c, err := sdk.New(cctx, g.config())
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	defer g.reportLease(c, cmd.ErrOrStderr())() // runs before Close: the sessions still live
	return fn(cmd.Context(), c)
}

func lockCmd(g *globals) *cobra.Command {
	var (
		shared    bool
		timeout   time.Duration
		lockDelay time.Duration
		permits   int
	)
	cmd := &cobra.Command{
		Use:     "lock PATH [--shared | --permits N] [--timeout DUR] [--lock-delay DUR] -- COMMAND [ARGS...]",
		Example: "  lockctl lock /demo/locks/nightly -- ./nightly-job.sh\n  lockctl lock /demo/locks/nightly --timeout 30s -- sh -c 'echo token $LOCK_TOKEN'\n  lockctl lock /demo/locks/billing --lock-delay 30s -- ./billing-run\n  lockctl lock /demo/locks/cache --shared -- ./read-only-job\n  lockctl lock /demo/locks/uploads --permits 3 -- ./upload-batch",
		Short:   "Run COMMAND while holding the lock PATH",
		Long: "Acquire the lock PATH (exclusive, shared with --shared, or one of N permits of\n" +
			"the semaphore PATH with --permits N), run COMMAND with the\n" +
			"fencing token in LOCK_TOKEN, release the lock when COMMAND exits and exit with\n" +
			"its status. With --timeout, give up if the lock is not acquired in time.\n" +
			"If the lock is lost or its lease falls into jeopardy, COMMAND is " + jobStopHelp() + " and\n" +
			"lockctl exits non-zero.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return usagef("lock takes PATH -- COMMAND [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []sdk.LockOption
			if shared {
				opts = append(opts, sdk.Shared())
			}
			if lockDelay < 0 || lockDelay > api.MaxLockDelay {
				return usagef("--lock-delay %v is outside 0 to %v", lockDelay, api.MaxLockDelay)
			}
			if lockDelay > 0 {
				opts = append(opts, sdk.WithLockDelay(lockDelay.Truncate(time.Millisecond)))
			}
			return g.withLongClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				h, err := lockHolder(c, args[0], permits, shared, opts) // semaphore.go
				if err != nil {
					return err
				}
				return runLocked(ctx, h, timeout, args[1:], cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	cmd.Flags().BoolVar(&shared, "shared", false, "take a shared (read) lock")
	cmd.Flags().IntVar(&permits, "permits", 0, "take one permit of the semaphore PATH of N permits (at most N holders at once; every client must name the same N; at most "+fmt.Sprint(api.MaxPermits)+")")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up if the lock is not held within this time (0: wait)")
	cmd.Flags().DurationVar(&lockDelay, "lock-delay", 0, "if this holder dies holding the lock (lockctl killed, its lease expired), nobody gets the lock for this long (at most "+api.MaxLockDelay.String()+"); a clean exit releases at once")
	return cmd
}

// queueCmd shows a lock: its holders and waiters, and its lock-delay.
func queueCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "queue PATH",
		Example: "  lockctl queue /demo/locks/nightly\n  lockctl queue /demo/locks/nightly -o json",
		Short:   "Show a lock: its holders, its waiters in order, and its lock-delay if it is in one",
		Args:    exactArgs("PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				q, err := c.LockQueue(ctx, args[0])
				if err != nil {
					return err
				}
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), q)
				}
				return printQueue(cmd.OutOrStdout(), q, time.Now())
			})
		},
	}
}

func printQueue(w io.Writer, q api.LockQueueResponse, now time.Time) error {
	if d := q.Delay; d != nil {
		left := ""
		if d.UntilMS > 0 {
			left = fmt.Sprintf(" until %s (%v left)", time.UnixMilli(d.UntilMS).Format(time.TimeOnly),
				max(0, time.UnixMilli(d.UntilMS).Sub(now)).Round(100*time.Millisecond))
		}
		fmt.Fprintf(w, "lock-delay: its holder's session ended while holding (index %d): nobody is granted %s for %v%s\n",
			d.Since, q.Path, time.Duration(d.MS)*time.Millisecond, left)
	}
	printPermits(w, q) // semaphore.go
	if len(q.Entries) == 0 {
		_, err := fmt.Fprintf(w, "%s: no holder, no waiter\n", q.Path)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tNODE\tMODE\tSESSION\tTOKEN")
	for i, e := range q.Entries {
		role, token := fmt.Sprintf("waiter %d", i), "-"
		if e.Held {
			role, token = "holder", fmt.Sprint(e.Token)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", role, e.Node, e.Mode, e.Session, token)
	}
	if q.More {
		fmt.Fprintf(tw, "...\t(more than %d)\t\t\t\n", len(q.Entries))
	}
	return tw.Flush()
}

func runLocked(ctx context.Context, m holder, timeout time.Duration, argv []string, stdout, stderr io.Writer) error {
	var err error
	if timeout > 0 {
		err = m.TryLock(ctx, timeout)
	} else {
		err = m.Lock(ctx)
	}
	if errors.Is(err, sdk.ErrLockTimeout) {
		return &api.Error{Code: codeLockTimeout, Message: fmt.Sprintf("lock not acquired within %v", timeout)}
	}
	if err != nil {
		return err
	}
	release := func() {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Unlock(uctx)
	}
	lockCtx := m.Context()

	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, stdout, stderr
	child.Env = append(os.Environ(), "LOCK_TOKEN="+strconv.FormatUint(m.Token(), 10), "LOCK_NODE="+m.Node())
	child.SysProcAttr = jobAttr()
	runtime.LockOSThread() // the parent-death signal follows the starting thread
	defer runtime.UnlockOSThread()
	if err := child.Start(); err != nil {
		release()
		return api.Errorf(api.CodeBadRequest, "start %s: %v", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	var cause error
	select {
	case werr := <-exited:
		release()
		return exitStatus(werr)
	case <-lockCtx.Done():
		cause = &api.Error{Code: codeLockLost, Message: "lock lost or lease in jeopardy; COMMAND was " + jobStop}
	case <-ctx.Done():
		cause = api.Errorf(api.CodeUnavailable, "interrupted; COMMAND was %s", jobStop)
	}
	termJob(child.Process)
	select {
	case <-exited:
	case <-time.After(killGrace):
		killJob(child.Process)
		<-exited
	}
	release()
	return cause
}

func exitStatus(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
		return &exitStatusError{code: code}
	}
	return api.Errorf(api.CodeInternal, "wait: %v", err)
}

func electCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "elect NAME VALUE",
		Example: "  lockctl elect /demo/elections/scheduler host-a:8080",
		Short:   "Campaign for leadership of NAME with VALUE; hold it until interrupted",
		Args:    exactArgs("NAME", "VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withLongClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				e := c.NewElection(args[0])
				out := cmd.OutOrStdout()
				for ctx.Err() == nil {
					if err := e.Campaign(ctx, []byte(args[1])); err != nil {
						if ctx.Err() != nil {
							break
						}
						return err
					}
					line := electLine{Type: electLeading, Name: args[0], Value: args[1], Token: e.Token()}
					if err := printElectLine(out, line, g.output == "json"); err != nil {
						return err
					}
					select {
					case <-e.Context().Done():
						line.Type = electLost
						if err := printElectLine(out, line, g.output == "json"); err != nil {
							return err
						}
					case <-ctx.Done():
					}
				}
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := e.Resign(rctx); err != nil && !errors.Is(err, sdk.ErrNotHeld) {
					return err
				}
				return nil
			})
		},
	}
}

// electLine is one line of lockctl elect: leading, or the leadership
// (with that token) lost or in doubt.
type electLine struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
	Token uint64 `json:"token"`
}

// The kinds of electLine.
const (
	electLeading = "leading"
	electLost    = "lost"
)

func printElectLine(out io.Writer, l electLine, asJSON bool) error {
	if asJSON {
		return writeJSONLine(out, l)
	}
	var err error
	if l.Type == electLeading {
		_, err = fmt.Fprintf(out, "leading %s as %q (token %d)\n", l.Name, l.Value, l.Token)
	} else {
		_, err = fmt.Fprintf(out, "leadership of %s lost or in doubt; campaigning again\n", l.Name)
	}
	return err
}

func leaderCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "leader NAME",
		Example: "  lockctl leader /demo/elections/scheduler",
		Short:   "Print the current leader's value of NAME (non-zero exit if nobody leads)",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				l, err := c.NewElection(args[0]).Leader(ctx)
				if errors.Is(err, sdk.ErrNoLeader) {
					return &api.Error{Code: codeNoLeader, Message: args[0] + " has no leader"}
				}
				if err != nil {
					return err
				}
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), leaderOutput{Node: l.Node, Value: string(l.Value), Token: l.Token})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", l.Value)
				return err
			})
		},
	}
}

type leaderOutput struct {
	Node  string `json:"node"`
	Value string `json:"value"`
	Token uint64 `json:"token"`
}

type memberOutput struct {
	Node  string `json:"node"`
	Value string `json:"value"`
}

func membersCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "members GROUP",
		Example: "  lockctl members /demo/groups/workers",
		Short:   "Print the live members of GROUP, one per line",
		Args:    exactArgs("GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				ms, err := c.Members(ctx, args[0])
				if err != nil {
					return err
				}
				out := make([]memberOutput, 0, len(ms))
				for _, m := range ms {
					out = append(out, memberOutput{Node: m.Node, Value: string(m.Value)})
				}
				if g.output == "json" {
					return writeJSON(cmd.OutOrStdout(), out)
				}
				for _, m := range out {
					if _, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", api.Base(m.Node), m.Value); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

// watchLine is one event as lockctl watch prints it.
type watchLine struct {
	Type    api.EventType `json:"type"`
	Path    string        `json:"path"`
	Index   uint64        `json:"index"`
	Exists  bool          `json:"exists"`
	Version uint64        `json:"version,omitempty"`
	Value   string        `json:"value,omitempty"`
}

func watchCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "watch PATH",
		Example: "  lockctl watch /demo/config",
		Short:   "Print one line per change of PATH's value, children or existence, until interrupted",
		Args:    exactArgs("PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withLongClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				return watchLoop(ctx, c, args[0], g.output == "json", cmd.OutOrStdout())
			})
		},
	}
}

// watchLoop re-arms a children watch (while the node exists) and a data
// watch after every event, and prints the event's line with the state read
// by the re-arming GetW: the printed state is the one the watches are
// armed at, so any later change fires again and the latest state is always
// printed (intermediate ones may be skipped).
func watchLoop(ctx context.Context, c *sdk.Client, path string, asJSON bool, out io.Writer) error {
	var pending *api.Event // the event whose line waits for the re-read
	for {
		// Children first: a child change between the two calls then fires
		// the children watch, and a data change shows in the GetW read.
		var childCh <-chan api.Event
		if _, _, ch, err := c.ChildrenW(ctx, path); err == nil {
			childCh = ch
		} else if !errors.Is(err, sdk.ErrNoNode) {
			return quietOnCancel(ctx, err)
		}
		cur, exists, dataCh, err := c.GetW(ctx, path)
		if err != nil {
			return quietOnCancel(ctx, err)
		}
		if exists && childCh == nil {
			continue // created between the two reads: arm its children watch too
		}
		if pending != nil {
			line := watchLine{Type: pending.Type, Path: pending.Path, Index: pending.Index}
			if exists {
				line.Exists, line.Version, line.Value = true, cur.Version, string(cur.Value)
			}
			if err := printWatchLine(out, line, asJSON); err != nil {
				return err
			}
			pending = nil
		}
		var ev api.Event
		var ok bool
		select {
		case ev, ok = <-dataCh:
		case ev, ok = <-childCh:
		case <-ctx.Done():
			return nil
		}
		if !ok {
			continue
		}
		if ev.Type == sdk.EventSessionExpired || ev.Type == sdk.EventSessionClosed {
			if ctx.Err() != nil {
				return nil
			}
			continue // the client opens a new session on the next read
		}
		pending = &ev
	}
}

func printWatchLine(out io.Writer, line watchLine, asJSON bool) error {
	if asJSON {
		return writeJSONLine(out, line)
	}
	state := "deleted"
	if line.Exists {
		state = fmt.Sprintf("version %d", line.Version)
	}
	_, err := fmt.Fprintf(out, "%s %s index=%d %s\n", line.Type, line.Path, line.Index, state)
	return err
}

func quietOnCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
