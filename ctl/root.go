// Package ctl is lockctl, the command-line client of lockd: the cobra
// command tree, runnable in-process (Execute returns errors; nothing here
// calls os.Exit). Every command but status goes through the SDK.
package ctl

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/tlsutil"
	"github.com/lockservice/lockd/sdk"
	"github.com/spf13/cobra"
)

// DefaultEndpoints is the local development cluster.
const DefaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005"

// Environment variables that supply defaults for the global flags.
const (
	EnvEndpoints = "LOCKCTL_ENDPOINTS"
	EnvAuthToken = "LOCKCTL_AUTH_TOKEN"
	EnvTLSCert   = "LOCKCTL_TLS_CERT"
	EnvTLSKey    = "LOCKCTL_TLS_KEY"
	EnvTLSCA     = "LOCKCTL_TLS_CA"
)

// globals are the persistent flags.
type globals struct {
	endpoints string
	authToken string
	timeout   time.Duration
	output    string
	direct    bool
	verbose   bool // -v: lease telemetry of the sessions a command holds (leasestats.go)
	tlsFiles  tlsutil.Files
	tls       *tls.Config // loaded from tlsFiles before any command runs
}

// noClusterAfter is how long every endpoint must refuse connections before
// a command says no cluster is running.
const noClusterAfter = 1500 * time.Millisecond

// access is what a probe of one endpoint presents.
func (g *globals) access() sdk.Access { return sdk.Access{AuthToken: g.authToken, TLS: g.tls} }

// config is the SDK configuration the flags ask for.
func (g *globals) config() sdk.Config {
	return sdk.Config{
		Endpoints:      g.endpointList(),
		AuthToken:      g.authToken,
		TLS:            g.tls,
		RequestTimeout: min(g.timeout, sdk.DefaultRequestTimeout),
		Direct:         g.direct,
		// Refusals from every endpoint mean nothing listens there: say so
		// at once rather than after the whole --timeout.
		NoClusterAfter: noClusterAfter,
	}
}

func (g *globals) endpointList() []string {
	var out []string
	for _, e := range strings.Split(g.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// usageError is a command-line mistake: a bad_request, exit status 2.
type usageError struct{ err *api.Error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{api.Errorf(api.CodeBadRequest, format, args...)}
}

// NewRootCommand builds the lockctl command tree. Flag defaults come from
// the environment (LOCKCTL_ENDPOINTS, LOCKCTL_AUTH_TOKEN) as it is when
// this is called.
func NewRootCommand() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "lockctl",
		Example:       "  make run                      (a local cluster, in another terminal)\n  lockctl put /demo/hello world\n  lockctl get /demo/hello\n  lockctl lock /demo/locks/job -- ./job.sh\n  lockctl status",
		Short:         "lockctl is the command-line client of the lockd lock service",
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			switch g.output {
			case "text", "json":
			default:
				return usagef("--output must be text or json, not %q", g.output)
			}
			if len(g.endpointList()) == 0 {
				return usagef("no endpoints: set --endpoints or %s", EnvEndpoints)
			}
			if g.timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			if g.tlsFiles.Set() {
				tc, err := g.tlsFiles.Client()
				if err != nil {
					return usagef("%v", err)
				}
				g.tls = tc
			}
			return nil
		},
	}
	endpoints := os.Getenv(EnvEndpoints)
	if endpoints == "" {
		endpoints = DefaultEndpoints
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.endpoints, "endpoints", endpoints, "comma-separated lockd API addresses (env "+EnvEndpoints+")")
	pf.StringVar(&g.authToken, "auth-token", os.Getenv(EnvAuthToken), "auth token sent as a bearer token (env "+EnvAuthToken+")")
	pf.StringVar(&g.tlsFiles.Cert, "tls-cert", os.Getenv(EnvTLSCert), "client certificate (PEM) for a cluster running TLS (env "+EnvTLSCert+")")
	pf.StringVar(&g.tlsFiles.Key, "tls-key", os.Getenv(EnvTLSKey), "its key (env "+EnvTLSKey+")")
	pf.StringVar(&g.tlsFiles.CA, "tls-ca", os.Getenv(EnvTLSCA), "the cluster's CA (PEM) (env "+EnvTLSCA+")")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "deadline for the whole command")
	pf.StringVarP(&g.output, "output", "o", "text", "output format: text or json")
	pf.BoolVarP(&g.verbose, "verbose", "v", false, "commands that hold a session (lock, elect, watch): print its lease figures on stderr every "+leaseReportEvery.String()+" and at the end")
	pf.BoolVar(&g.direct, "direct", false, "talk to the cells' replicas even when the directory lists lockproxies (by default calls go through the proxies)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("%v", err) })

	root.AddCommand(putCmd(g), getCmd(g), lsCmd(g), rmCmd(g), statusCmd(g), backupCmd(g), restoreCmd(g),
		lockCmd(g), queueCmd(g), electCmd(g), leaderCmd(g), membersCmd(g), watchCmd(g),
		cellsCmd(g), cellCmd(g), prefixCmd(g), migrateCmd(g), memberCmd(g), tenantCmd(g))
	root.AddCommand(txnCmd(g)) // txn.go
	return root
}

// Execute runs lockctl with args (without the program name), writing
// output to stdout. It returns the command's error; FormatError renders it
// as the one line lockctl prints on stderr and ExitCode gives the status.
// stderr receives help and usage text only.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := NewRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var es *exitStatusError
	if err != nil && api.CodeOf(err) == "" && !errors.Is(err, sdk.ErrClosed) && !errors.As(err, &es) {
		// Cobra's own complaints (unknown command, bad arguments).
		err = &usageError{api.Errorf(api.CodeBadRequest, "%v", err)}
	}
	return err
}

// FormatError is the single stderr line for err, naming its code:
// "lockctl: no_node: /demo/x does not exist".
func FormatError(err error) string {
	msg := err.Error()
	if api.CodeOf(err) == "" {
		msg = string(api.CodeInternal) + ": " + msg
	}
	return "lockctl: " + strings.Join(strings.Fields(msg), " ")
}

// ExitCode is lockctl's exit status for err: 0 for nil, 2 for usage
// errors, COMMAND's status for lock, 1 otherwise.
func ExitCode(err error) int {
	var (
		ue *usageError
		es *exitStatusError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &es):
		return es.code
	case errors.As(err, &ue):
		return 2
	default:
		return 1
	}
}

// Main runs lockctl as a program would and returns its exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := Execute(ctx, args, stdout, stderr)
	var es *exitStatusError
	if err != nil && !errors.As(err, &es) {
		fmt.Fprintln(stderr, FormatError(err))
	}
	return ExitCode(err)
}

// exactArgs is cobra.ExactArgs with a usage error naming the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usagef("%s takes %d argument(s) (%s), got %d", cmd.Name(), len(names), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// withClient runs fn with an SDK client and a context bounded by --timeout.
func (g *globals) withClient(cmd *cobra.Command, fn func(ctx context.Context, c *sdk.Client) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	defer cancel()
	c, err := sdk.New(ctx, g.config())
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// writeJSON prints a command's -o json output: one indented document.
// Its shape is documented, and checked, in docs/lockctl.md.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(emptyNotNull(v))
}

// writeJSONLine prints one line of a streaming command's -o json output.
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(emptyNotNull(v))
}
