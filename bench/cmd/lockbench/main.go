// Command lockbench measures a lockd deployment for capacity planning:
// lock acquisition, committed writes, thundering herds, against a running
// cluster (--endpoints) or a local one it starts itself (--start).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/bench/report"
)

func main() {
	if err := rootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// options are run's flags.
type options struct {
	endpoints  []string
	start      bool
	lockd      string
	lockctl    string
	logdb      string
	timerSlack int
	// parkKeepAlives: --proxy-park-keepalives.
	parkKeepAlives bool
	diskDir        string
	trials         int
	// failoverFault: how failover takes the leader away (kill or pause).
	failoverFault string
	state         stateSize
	lease         time.Duration
	duration      time.Duration
	concurrency   []int
	writers       int
	prefixes      []string
	contenders    int
	handoffs      int
	sessions      int
	cachers       int
	cells         int
	migrateN      int
	migrateVal    int
	output        string
	jsonFile      string
	htmlFile      string
	profileDir    string
	// stagesN: the stages scenario's Lock+Unlock per route; dataDir: the
	// parent folder of --start's cluster data ("": $TMPDIR).
	stagesN int
	dataDir string
	// proxies: lockproxy processes with --start; viaProxies: scenarios
	// send through them; proxySessions: the proxy scenario's cases.
	proxies       int
	viaProxies    bool
	proxySessions []int
	// auth: --start a cluster that requires tokens; adminToken: the
	// admin token of a running one (--endpoints). floodWriters and
	// floodQuota: the flood scenario's noisy tenant.
	auth         bool
	adminToken   string
	floodWriters int
	floodQuota   int
	// target: the system measured (lockd or etcd, target.go); etcd: the
	// etcd binary of --target etcd --start.
	target string
	etcd   string
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "lockbench",
		Short:         "Measure a lockd deployment: acquire latency, write throughput, herds",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(runCommand(), capacityCommand(), compareCommand())
	return root
}

var scenarioNames = []string{"acquire", "writes", "herd", "sessions", "cache", "state", "migrate", "takeover", "failover", "disk", "proxy", "flood", "stages"}

func runCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "run SCENARIO...",
		Short: "Run scenarios (" + strings.Join(scenarioNames, ", ") + ") and print a table",
		Example: `  lockbench run acquire --start --duration 10s
  lockbench run writes herd --endpoints 127.0.0.1:7001,127.0.0.1:7002 --json out.json --html out.html`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if !slices.Contains(scenarioNames, a) {
					return fmt.Errorf("unknown scenario %q (have %s; capacity is its own command)", a, strings.Join(scenarioNames, ", "))
				}
			}
			diskOnly := !slices.ContainsFunc(args, func(a string) bool { return a != "disk" })
			if o.start && len(o.endpoints) > 0 || !diskOnly && !o.start && len(o.endpoints) == 0 {
				return fmt.Errorf("give exactly one of --endpoints and --start (only disk needs no cluster)")
			}
			if o.output != "table" && o.output != "json" {
				return fmt.Errorf("-o must be table or json")
			}
			if o.failoverFault != "kill" && o.failoverFault != "pause" {
				return fmt.Errorf("--failover-fault must be kill or pause")
			}
			if o.trials < 1 || o.trials > maxTrials {
				return fmt.Errorf("--trials must be 1 to %d", maxTrials)
			}
			if err := checkTarget(o.target, args, changedFlags(cmd)); err != nil {
				return err
			}
			if o.start && !cmd.Flags().Changed("prefixes") {
				o.prefixes = localPrefixes(o.cells)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.endpoints, "endpoints", nil, "API addresses of a running cluster")
	f.BoolVar(&o.start, "start", false, "start a local five-replica cluster (lockd dev: real processes, fsync on, production timing) and stop it at the end")
	f.StringVar(&o.lockd, "lockd", "", "lockd binary for --start (default: lockd beside lockbench)")
	f.StringVar(&o.logdb, "logdb", "small", "with --start: the replicas' LogDB memory preset (small: lockd serve's default; tiny: lockd dev's)")
	f.IntVar(&o.timerSlack, "timer-slack-us", 0, "with --start: the replicas' and proxies' --timer-slack-us (0: their default, 1 ms; -1: the OS's own timer slack)")
	f.StringVar(&o.diskDir, "disk-dir", os.TempDir(), "disk: where to measure append+fdatasync (put it where the replicas keep their data)")
	f.StringVar(&o.lockctl, "lockctl", "", "lockctl binary, takeover's holder process (default: lockctl beside lockbench)")
	f.IntVar(&o.trials, "trials", 2, "failover, takeover: trials (failover kills at most two leaders of five; a pause resumes each, so any number up to 200)")
	f.StringVar(&o.failoverFault, "failover-fault", "kill", "failover: kill (kill -9 of the leader) or pause (SIGSTOP of the leader, SIGCONT after the next grant)")
	f.IntVar(&o.state.locks, "state-locks", 20_000, "state: locks held")
	f.IntVar(&o.state.members, "state-members", 50_000, "state: ephemeral members")
	f.IntVar(&o.state.values, "state-values", 30_000, "state: config values")
	f.IntVar(&o.state.valueBytes, "state-value-bytes", 1024, "state: bytes per config value")
	f.DurationVar(&o.lease, "lease", 12*time.Second, "session lease")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long each case runs")
	f.IntSliceVar(&o.concurrency, "concurrency", []int{1, 8, 32, 128}, "acquire: workers per case")
	f.IntVar(&o.writers, "writers", 64, "writes: concurrent writers")
	f.StringSliceVar(&o.prefixes, "prefixes", []string{"/demo", "/payments"}, "writes: prefixes (cells) the writers are spread over (with --start: every cell's)")
	f.IntVar(&o.cells, "cells", 2, "with --start: cells in the local cluster (/demo, /payments, /cell3, …): the multi-Raft scaling curve")
	f.IntVar(&o.contenders, "contenders", 500, "herd: contenders on the one lock")
	f.IntVar(&o.handoffs, "handoffs", 500, "herd: handoffs measured")
	f.IntVar(&o.migrateN, "migrate-nodes", 10_000, "migrate: persistent nodes under the prefix moved")
	f.IntVar(&o.migrateVal, "migrate-value-bytes", 256, "migrate: bytes per node value")
	f.IntVar(&o.sessions, "sessions", 2000, "sessions: sessions held (the spec's region holds 50 000)")
	f.IntVar(&o.cachers, "cachers", 2000, "cache: clients caching the one value (one session each)")
	f.BoolVar(&o.parkKeepAlives, "proxy-park-keepalives", false, "with --start: the proxies park their clients' held KeepAlives (lockproxy --park-keepalives: less memory, more CPU)")
	f.IntVar(&o.proxies, "proxies", 2, "with --start: lockproxy processes (lockproxy beside lockbench); the proxy scenario needs them")
	f.BoolVar(&o.viaProxies, "via-proxies", false, "send every scenario's calls through the proxies the directory lists (default: straight to the replicas)")
	f.IntSliceVar(&o.proxySessions, "proxy-sessions", []int{10_000, 100_000}, "proxy: sessions renewed through the proxies, per case")
	f.StringVarP(&o.output, "output", "o", "table", "table or json on stdout")
	f.StringVar(&o.jsonFile, "json", "", "also write the results as JSON to this file")
	f.StringVar(&o.htmlFile, "html", "", "also write a self-contained HTML report with charts to this file")
	f.BoolVar(&o.auth, "auth", false, "with --start: the cluster requires tokens (lockd dev --auth); lockbench acts as its admin")
	f.StringVar(&o.adminToken, "admin-token", "", "with --endpoints: the cluster's admin token, when it requires tokens")
	f.IntVar(&o.floodWriters, "flood-writers", 64, "flood: the noisy tenant's concurrent writers")
	f.IntVar(&o.floodQuota, "flood-quota", 0, "flood: the noisy tenant's writes per second (0: the default quota)")
	f.StringVar(&o.profileDir, "profile-dir", "", "save a CPU profile of the demo cell's leader per case in this folder (the cluster must run with --pprof, as --start's does)")
	f.IntVar(&o.stagesN, "stages-n", 200, "stages: traced Lock+Unlock per route (direct, via proxy)")
	f.StringVar(&o.dataDir, "data-dir", "", "with --start: the folder the cluster's data goes under (/dev/shm: tmpfs; default $TMPDIR)")
	f.StringVar(&o.target, "target", targetLockd, "the system measured: lockd, or etcd (acquire, writes, herd, sessions through etcd's client; --start runs five local etcd members)")
	f.StringVar(&o.etcd, "etcd", "", "with --target etcd --start: the etcd binary (default: etcd on PATH, else /usr/bin/etcd)")
	f.IntVar(&portRun.next, "port-base", 0, "with --start: the first of a run of free loopback ports the cluster takes in order (2 per replica or member, 1 per proxy; default: drawn at random)")
	return cmd
}

func run(ctx context.Context, o options, scenarios []string, stdout, stderr io.Writer) error {
	e := &env{adminToken: o.adminToken, endpoints: o.endpoints, lease: o.lease, duration: o.duration, viaProxies: o.viaProxies,
		run: fmt.Sprintf("%d", time.Now().UnixNano()), progress: progressLine(stderr), profileDir: o.profileDir}
	var procs []int // the replicas' PIDs, when lockbench started them
	if o.start && o.target == targetEtcd {
		fmt.Fprintln(stderr, "starting a local five-member etcd cluster…")
		ec, err := startEtcd(ctx, o.etcd, o.dataDir)
		if err != nil {
			return err
		}
		defer ec.stop()
		e.endpoints, procs = ec.layout.endpoints(), ec.pids()
	}
	if o.start && o.target != targetEtcd {
		fmt.Fprintln(stderr, "starting a local five-replica cluster (lockd dev)…")
		lc, err := startLocal(ctx, localSpec{lockd: o.lockd, dataDir: o.dataDir, lease: o.lease, cells: o.cells, logdb: o.logdb,
			timerSlackUS: o.timerSlack, proxies: o.proxies, auth: o.auth, parkKeepAlives: o.parkKeepAlives})
		if err != nil {
			return err
		}
		defer lc.stop()
		e.endpoints, e.adminToken = lc.endpoints, lc.adminToken
		defer func() { // before lc.stop: the replicas lockbench restarted itself
			for _, f := range e.exitFns {
				f()
			}
		}()
		procs = replicaPIDs(lc.cmd.Process.Pid, len(lc.endpoints))
	}
	host, _ := os.Hostname()
	r := &report.Run{Started: time.Now(), Endpoints: e.endpoints,
		Host: fmt.Sprintf("%s (%d CPUs, %s/%s)", host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)}
	e.target = newTarget(o.target, e)
	rec := newRunRecord(ctx, r, o.target, e.target, stderr)
	for _, sc := range scenarios {
		fmt.Fprintf(stderr, "running %s…\n", sc)
		res, err := runScenario(ctx, e, o, sc, procs)
		r.Results = append(r.Results, res...)
		if err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
	}
	if err := e.firstErr.Load(); err != nil {
		fmt.Fprintf(stderr, "first failed operation: %v\n", *err)
	}
	return writeRun(rec, o, stdout)
}

// runScenario runs one scenario by its name.
func runScenario(ctx context.Context, e *env, o options, sc string, procs []int) ([]report.Result, error) {
	switch sc {
	case "acquire":
		return acquire(ctx, e, o.concurrency)
	case "writes":
		return writes(ctx, e, o.writers, o.prefixes)
	case "herd":
		return herd(ctx, e, o.contenders, o.handoffs)
	case "sessions":
		return sessionsScenario(ctx, e, o.sessions, procs)
	case "cache":
		return cacheScenario(ctx, e, o.cachers)
	case "failover":
		if o.failoverFault == "pause" {
			return failoverPause(ctx, e, procs, o.trials)
		}
		return failover(ctx, e, procs, o.trials)
	case "takeover":
		return takeover(ctx, e, o.lockctl, o.trials)
	case "state":
		return stateScenario(ctx, e, o.state, procs)
	case "migrate":
		return migrateScenario(ctx, e, o.migrateN, o.migrateVal)
	case "disk":
		return disk(ctx, e, o.diskDir)
	case "proxy":
		return proxyScenario(ctx, e, o.proxySessions, procs)
	case "stages":
		return stagesScenario(ctx, e, o.stagesN)
	case "flood":
		return flood(ctx, e, o.floodWriters, o.floodQuota)
	}
	return nil, nil
}

// writeRun writes the run's report: to the JSON and HTML files asked for,
// and to stdout as a table or JSON.
func writeRun(r *runRecord, o options, stdout io.Writer) error {
	if r.Target != targetEtcd { // an etcd run's figures size no lockd deployment
		r.Capacity = runCapacityPlan(r.Run)
	}
	if o.jsonFile != "" {
		if err := writeFile(o.jsonFile, r.JSON); err != nil {
			return err
		}
	}
	if o.htmlFile != "" {
		if err := writeFile(o.htmlFile, r.HTML); err != nil {
			return err
		}
	}
	if o.output == "json" {
		return r.JSON(stdout)
	}
	return r.Table(stdout)
}

func writeFile(path string, render func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := render(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// progressLine overwrites one status line on a terminal; elsewhere (CI
// logs, files) it prints nothing, so logs stay readable.
func progressLine(w io.Writer) func(format string, args ...any) {
	f, ok := w.(*os.File)
	if !ok {
		return func(string, ...any) {}
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return func(string, ...any) {}
	}
	return func(format string, args ...any) {
		fmt.Fprintf(w, "\r\033[K"+format, args...)
	}
}

// localPrefixes are the prefixes of a `lockd dev --cells n` cluster.
func localPrefixes(n int) []string {
	out := []string{"/demo", "/payments"}[:min(n, 2)]
	for i := 3; i <= n; i++ {
		out = append(out, fmt.Sprintf("/cell%d", i))
	}
	return out
}
