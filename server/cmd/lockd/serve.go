package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/timerslack"
	"github.com/lockservice/lockd/server/backup"
	"github.com/lockservice/lockd/server/lockd"
)

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "lockd",
		Short:         "lockd: a Chubby-style distributed lock service",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCommand(), restoreCommand(), devCommand(), certsCommand(), versionCommand())
	return root
}

// serveFlags are the flags that describe a lockd: serve runs one, and
// restore imports a backup into one (it must be given the same flags).
type serveFlags struct {
	configPath  string
	peers       []string
	cells       []string
	cfg         lockd.Config
	lease       time.Duration
	backupEvery time.Duration
	logLevel    string
	balance     bool
	// logCodecMax is the hidden --log-codec-max (rolling-upgrade tests).
	logCodecMax int
}

func (sf *serveFlags) register(f *pflag.FlagSet) {
	f.StringVar(&sf.configPath, "config", "", "JSON config file (flags given explicitly override it)")
	f.Uint64Var(&sf.cfg.ReplicaID, "id", 0, "this lockd's id: one of the peers, or a new lockd joining them (then give --raft-addr and --api-addr)")
	f.StringVar(&sf.cfg.RaftAddr, "raft-addr", "", "this lockd's Raft address, when it is not one of the --peer entries")
	f.StringVar(&sf.cfg.RaftListen, "raft-listen", "", "the address Raft binds, when it differs from the address peers dial (behind NAT, a load balancer or a relay)")
	f.StringVar(&sf.cfg.APIAddr, "api-addr", "", "this lockd's API address, when it is not one of the --peer entries")
	f.StringVar(&sf.cfg.Zone, "zone", "", "this lockd's failure domain: a cell's replicas are spread over zones")
	f.BoolVar(&sf.balance, "balance-leaders", true, "when this lockd leads the directory group, move cells' leaderships so that no lockd leads two more than another")
	f.StringVar(&sf.cfg.DataDir, "data-dir", "", "directory for the Raft log and snapshots")
	f.StringArrayVar(&sf.peers, "peer", nil, "a bootstrap member as ID,RAFT_ADDR,API_ADDR (repeat for each of the 5, or 3): they host the directory group")
	f.StringArrayVar(&sf.cells, "cell", nil, "a bootstrap cell on the members, as NAME,SHARD_ID,PREFIX[+PREFIX][,heartbeat=D,election=D,lease=D,keepalive=D,grace=D] (repeat; the timing is the cell's own, else the lockd's); read once, when the directory is first created")
	f.DurationVar(&sf.lease, "lease", 12*time.Second, "default session lease")
	f.Uint64Var(&sf.cfg.RTTMillisecond, "rtt-ms", 100, "Raft tick; heartbeat every tick, election timeout 10–20 ticks")
	f.StringVar(&sf.cfg.LogDB, "logdb", "small", "LogDB memory preset: tiny, small, medium, large")
	f.IntVar(&sf.cfg.MemoryLimitMB, "memory-limit-mb", 0, "the Go runtime's soft memory limit in MB (0: 2048, twice the spec's 1 GB state bound)")
	f.IntVar(&sf.cfg.GCPercent, "gc-percent", 0, "the Go collector's target percent (0: 50; -1: collect only at --memory-limit-mb)")
	f.IntVar(&sf.cfg.TimerSlackUS, "timer-slack-us", 0, "the OS timer slack of every thread, in µs (0: 1000; -1: the OS's own; at most 10000); Linux, where lockd re-executes itself once at start to set it")
	f.Uint64Var(&sf.cfg.SnapshotEntries, "snapshot-entries", 100_000, "snapshot every N applied entries")
	f.Uint64Var(&sf.cfg.DeploymentID, "deployment-id", 1, "cluster id; lockds with different ids ignore each other")
	f.StringVar(&sf.logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&sf.cfg.Pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on the API port")
	f.StringVar(&sf.cfg.BackupDir, "backup-dir", "", "backup store: exported snapshots of the cells this lockd leads go here (lockctl backup, --backup-every)")
	f.DurationVar(&sf.backupEvery, "backup-every", time.Hour, "with --backup-dir: back up every cell this lockd leads this often (0: only on lockctl backup)")
	f.StringVar(&sf.cfg.AuditFile, "audit-file", "", "also write the audit log (admin changes: tenants, tokens, moves, restores, membership, backups; refused admin requests) to this file, one JSON record a line (it always goes to the log, audit=true)")
	f.IntVar(&sf.cfg.AuditMaxMB, "audit-max-mb", 0, "with --audit-file: rotate it past this many MB (0: 100)")
	f.IntVar(&sf.cfg.AuditKeep, "audit-keep", 0, "with --audit-file: rotated files kept, FILE.1 the newest (0: 5; at most 100)")
	f.StringVar(&sf.cfg.TLSCert, "tls-cert", "", "this lockd's API TLS certificate (PEM; server and client use: lockds call each other's API): the API runs mutual TLS")
	f.StringVar(&sf.cfg.TLSKey, "tls-key", "", "the key of --tls-cert")
	f.StringVar(&sf.cfg.TLSCA, "tls-ca", "", "the API's CA (PEM): API clients (applications, lockctl, lockproxies, lockds) must present certificates it signed")
	f.StringVar(&sf.cfg.RaftTLSCert, "raft-tls-cert", "", "this lockd's Raft TLS certificate (PEM; server and client use), signed by --raft-tls-ca: Raft runs mutual TLS (required with --tls-cert)")
	f.StringVar(&sf.cfg.RaftTLSKey, "raft-tls-key", "", "the key of --raft-tls-cert")
	f.StringVar(&sf.cfg.RaftTLSCA, "raft-tls-ca", "", "the Raft CA (PEM): a CA of its own, not --tls-ca, that signs only lockds' Raft certificates; replicas must present a certificate it signed")
	f.BoolVar(&sf.cfg.PlainHTTP, "plain-http", false, "run the API and Raft without TLS (development only; without TLS files lockd refuses to start unless given this)")
	f.StringVar(&sf.cfg.AdminTokenFile, "admin-token-file", "", "require API tokens: this file holds the cluster's bootstrap admin token (the same on every lockd); tenants' tokens come from lockctl tenant")
	f.IntVar(&sf.logCodecMax, "log-codec-max", int(lockd.NewestLogCodec), "tests only: 0 makes this lockd stand for a build from before the binary log codec (it advertises codec 0 and proposes JSON)")
	_ = f.MarkHidden("log-codec-max")
}

// config builds the lockd's configuration: the file, then the flags given.
func (sf *serveFlags) config(cmd *cobra.Command) (lockd.Config, error) {
	cfg, flags := sf.cfg, sf.cfg
	f := cmd.Flags()
	if sf.configPath != "" {
		loaded, err := lockd.LoadConfig(sf.configPath)
		if err != nil {
			return cfg, err
		}
		cfg = loaded
		overrideFromFlags(&cfg, flags, f) // flags given explicitly override the file
	}
	for _, s := range sf.peers {
		p, err := lockd.ParsePeer(s)
		if err != nil {
			return cfg, err
		}
		cfg.Peers = append(cfg.Peers, p)
	}
	for _, s := range sf.cells {
		c, err := lockd.ParseCell(s)
		if err != nil {
			return cfg, err
		}
		cfg.Cells = append(cfg.Cells, c)
	}
	if f.Changed("balance-leaders") {
		cfg.NoLeaderBalance = !sf.balance
	}
	switch sf.logCodecMax {
	case 0:
		cfg.JSONLog = true
	case int(lockd.NewestLogCodec):
	default:
		return cfg, fmt.Errorf("--log-codec-max %d: 0 (JSON only) or %d (this build's newest)", sf.logCodecMax, lockd.NewestLogCodec)
	}
	if f.Changed("lease") || cfg.Lease == 0 {
		cfg.Lease = lockd.Duration(sf.lease)
	}
	if f.Changed("backup-every") || cfg.BackupEvery == 0 {
		cfg.BackupEvery = lockd.Duration(sf.backupEvery)
	}
	return cfg, nil
}

// rereadBlocked is why the binary could not be run again with the same
// arguments ("" if it can): a config read from a pipe, a FIFO or a
// terminal is gone once read.
func (sf *serveFlags) rereadBlocked() string {
	if sf.configPath == "" {
		return ""
	}
	if st, err := os.Stat(sf.configPath); err == nil && !st.Mode().IsRegular() {
		return fmt.Sprintf("--config %s is not a regular file, and re-executing would read it again (pass a file, or set the slack with systemd's TimerSlackNSec)", sf.configPath)
	}
	return ""
}

// overrideFromFlags sets, in cfg (read from --config), every field whose
// flag was given explicitly, from flags.
func overrideFromFlags(cfg *lockd.Config, flags lockd.Config, f *pflag.FlagSet) {
	for _, o := range []struct {
		name string
		set  func()
	}{
		{"id", func() { cfg.ReplicaID = flags.ReplicaID }},
		{"data-dir", func() { cfg.DataDir = flags.DataDir }},
		{"rtt-ms", func() { cfg.RTTMillisecond = flags.RTTMillisecond }},
		{"logdb", func() { cfg.LogDB = flags.LogDB }},
		{"memory-limit-mb", func() { cfg.MemoryLimitMB = flags.MemoryLimitMB }},
		{"gc-percent", func() { cfg.GCPercent = flags.GCPercent }},
		{"timer-slack-us", func() { cfg.TimerSlackUS = flags.TimerSlackUS }},
		{"snapshot-entries", func() { cfg.SnapshotEntries = flags.SnapshotEntries }},
		{"deployment-id", func() { cfg.DeploymentID = flags.DeploymentID }},
		{"pprof", func() { cfg.Pprof = flags.Pprof }},
		{"backup-dir", func() { cfg.BackupDir = flags.BackupDir }},
		{"audit-file", func() { cfg.AuditFile = flags.AuditFile }},
		{"audit-max-mb", func() { cfg.AuditMaxMB = flags.AuditMaxMB }},
		{"audit-keep", func() { cfg.AuditKeep = flags.AuditKeep }},
		{"zone", func() { cfg.Zone = flags.Zone }},
		{"raft-addr", func() { cfg.RaftAddr = flags.RaftAddr }},
		{"raft-listen", func() { cfg.RaftListen = flags.RaftListen }},
		{"api-addr", func() { cfg.APIAddr = flags.APIAddr }},
		{"admin-token-file", func() { cfg.AdminTokenFile = flags.AdminTokenFile }},
		{"tls-cert", func() { cfg.TLSCert = flags.TLSCert }},
		{"tls-key", func() { cfg.TLSKey = flags.TLSKey }},
		{"tls-ca", func() { cfg.TLSCA = flags.TLSCA }},
		{"raft-tls-cert", func() { cfg.RaftTLSCert = flags.RaftTLSCert }},
		{"raft-tls-key", func() { cfg.RaftTLSKey = flags.RaftTLSKey }},
		{"raft-tls-ca", func() { cfg.RaftTLSCA = flags.RaftTLSCA }},
		{"plain-http", func() { cfg.PlainHTTP = flags.PlainHTTP }},
	} {
		if f.Changed(o.name) {
			o.set()
		}
	}
}

func serveCommand() *cobra.Command {
	var sf serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one lockd: a replica of every configured cell and the API",
		Example: `  lockd serve --id 1 --data-dir /var/lib/lockd \
    --peer 1,10.0.0.1:7100,10.0.0.1:7000 --peer 2,... (five peers) \
    --cell demo,1,/demo --cell payments,2,/payments`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := sf.config(cmd)
			if err != nil {
				return err
			}
			slack, err := lockd.TimerSlackFor(cfg)
			if err != nil {
				return err
			}
			// First, before the lockd opens anything: it may re-execute the
			// binary, which reads its config again.
			return serve(cfg, sf.logLevel, timerslack.Ensure(slack, sf.rereadBlocked()))
		},
	}
	sf.register(cmd.Flags())
	return cmd
}

func restoreCommand() *cobra.Command {
	var (
		sf       serveFlags
		cellName string
		from     string
		planFile string
		index    uint64
	)
	cmd := &cobra.Command{
		Use:   "restore --cell-name CELL --from BACKUP_DIR [--plan FILE] SERVE-FLAGS…",
		Short: "Import a cell's backup into this lockd, as lockctl restore planned it (disaster recovery; the lockd must be stopped)",
		Long: `Imports the backup of CELL that its restore plan names into this lockd's
data directory, as the replica the plan places here. Plan first with
lockctl restore CELL --index N [--on LOCKDS]: it gives the cell new replicas
and raises its prefixes' epochs. Then, on every lockd of the plan: stop it,
run lockd restore with the flags it is served with, start it with lockd
serve. The cell serves once a majority is restored, from the backup's state
(every entry after the backup is lost). The plan is read from the
directory, or from --plan (lockctl restore -o json) if no directory
replica answers. Other cells are untouched.`,
		Example: `  lockctl restore payments --index 812345 --on 4,5,6 -o json > plan.json
  lockd restore --cell-name payments --from /backups/lockd \
    --id 4 --data-dir /var/lib/lockd --raft-addr 10.0.0.4:7100 --api-addr 10.0.0.4:7000 \
    --peer 1,10.0.0.1:7100,10.0.0.1:7000 …`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := sf.config(cmd)
			if err != nil {
				return err
			}
			if cellName == "" || from == "" {
				return fmt.Errorf("restore needs --cell-name and --from")
			}
			var plan *api.RestorePlan
			if planFile != "" {
				b, err := os.ReadFile(planFile)
				if err != nil {
					return err
				}
				plan = &api.RestorePlan{}
				if err := json.Unmarshal(b, plan); err != nil {
					return fmt.Errorf("%s: not a restore plan: %w", planFile, err)
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			got, err := lockd.Restore(ctx, cfg, cellName, backup.Dir{Root: from}, index, plan)
			if err != nil {
				return err
			}
			fmt.Printf("lockd %d: cell %s restored from the backup at index %d; start it with lockd serve\n", cfg.ReplicaID, cellName, got)
			return nil
		},
	}
	sf.register(cmd.Flags())
	cmd.Flags().StringVar(&cellName, "cell-name", "", "the cell to restore")
	cmd.Flags().StringVar(&from, "from", "", "the backup store (a --backup-dir)")
	cmd.Flags().StringVar(&planFile, "plan", "", "the restore plan as lockctl restore -o json printed it (default: read it from the directory)")
	cmd.Flags().Uint64Var(&index, "index", 0, "the backup's index, checked against the plan's")
	return cmd
}

func serve(cfg lockd.Config, level string, slack timerslack.Report) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("log level %q: %w", level, err)
	}
	if self := cfg.Self(); self.ID != 0 {
		raft := self.RaftAddr
		if cfg.RaftListen != "" {
			raft = cfg.RaftListen // the address it binds; peers dial RaftAddr
		}
		if err := checkPorts([]portUse{{self.APIAddr, "api", self.ID}, {raft, "raft", self.ID}}); err != nil {
			return err
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	slack.Log(log)
	p, err := lockd.Start(cfg, log)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
	case err = <-p.Served():
	}
	p.Close()
	return err
}
