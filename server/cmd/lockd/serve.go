package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/server/lockd"
)

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "lockd",
		Short:         "lockd: a Chubby-style distributed lock service",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCommand(), devCommand(), versionCommand())
	return root
}

func serveCommand() *cobra.Command {
	var (
		configPath string
		peers      []string
		cells      []string
		cfg        lockd.Config
		lease      time.Duration
		logLevel   string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one lockd: a replica of every configured cell and the API",
		Example: `  lockd serve --id 1 --data-dir /var/lib/lockd \
    --peer 1,10.0.0.1:7100,10.0.0.1:7000 --peer 2,... (five peers) \
    --cell demo,1,/demo --cell payments,2,/payments`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flags := cfg
			if configPath != "" {
				loaded, err := lockd.LoadConfig(configPath)
				if err != nil {
					return err
				}
				cfg = loaded
				// Flags given explicitly override the file.
				f := cmd.Flags()
				if f.Changed("id") {
					cfg.ReplicaID = flags.ReplicaID
				}
				if f.Changed("data-dir") {
					cfg.DataDir = flags.DataDir
				}
				if f.Changed("rtt-ms") {
					cfg.RTTMillisecond = flags.RTTMillisecond
				}
				if f.Changed("logdb") {
					cfg.LogDB = flags.LogDB
				}
				if f.Changed("snapshot-entries") {
					cfg.SnapshotEntries = flags.SnapshotEntries
				}
				if f.Changed("deployment-id") {
					cfg.DeploymentID = flags.DeploymentID
				}
				if f.Changed("pprof") {
					cfg.Pprof = flags.Pprof
				}
			}
			for _, s := range peers {
				p, err := lockd.ParsePeer(s)
				if err != nil {
					return err
				}
				cfg.Peers = append(cfg.Peers, p)
			}
			for _, s := range cells {
				c, err := lockd.ParseCell(s)
				if err != nil {
					return err
				}
				cfg.Cells = append(cfg.Cells, c)
			}
			if cmd.Flags().Changed("lease") || cfg.Lease == 0 {
				cfg.Lease = lockd.Duration(lease)
			}
			return serve(cfg, logLevel)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "JSON config file (flags given explicitly override it)")
	f.Uint64Var(&cfg.ReplicaID, "id", 0, "this lockd's replica id (one of the peers)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for the Raft log and snapshots")
	f.StringArrayVar(&peers, "peer", nil, "a peer as ID,RAFT_ADDR,API_ADDR (repeat for each of the 5 replicas)")
	f.StringArrayVar(&cells, "cell", nil, "a cell as NAME,SHARD_ID,PREFIX[+PREFIX] (repeat)")
	f.DurationVar(&lease, "lease", 12*time.Second, "default session lease")
	f.Uint64Var(&cfg.RTTMillisecond, "rtt-ms", 100, "Raft tick; heartbeat every tick, election timeout 10–20 ticks")
	f.StringVar(&cfg.LogDB, "logdb", "small", "LogDB memory preset: tiny, small, medium, large")
	f.Uint64Var(&cfg.SnapshotEntries, "snapshot-entries", 100_000, "snapshot every N applied entries")
	f.Uint64Var(&cfg.DeploymentID, "deployment-id", 1, "cluster id; lockds with different ids ignore each other")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&cfg.Pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on the API port")
	return cmd
}

func serve(cfg lockd.Config, level string) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("log level %q: %w", level, err)
	}
	if self := cfg.Self(); self.ID != 0 {
		if err := checkPorts([]portUse{{self.APIAddr, "api", self.ID}, {self.RaftAddr, "raft", self.ID}}); err != nil {
			return err
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
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
