// Command lockproxy runs one proxy of the lock service: clients connect to
// it instead of the cells' replicas, and it renews all their sessions on a
// cell with one batched KeepAlive per second.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/internal/timerslack"
	"github.com/lockservice/lockd/internal/tlsutil"
	"github.com/lockservice/lockd/proxy"
)

func main() {
	if err := rootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "lockproxy:", err)
		os.Exit(1)
	}
}

func rootCommand() *cobra.Command {
	var (
		cfg       proxy.Config
		lockds    string
		logLevel  string
		tokenFile string
		tlsFiles  tlsutil.Files
		plain     bool
		pprofAddr string
		slackUS   int
	)
	cmd := &cobra.Command{
		Use:   "lockproxy",
		Short: "Run a lock service proxy: terminates client connections, batches their KeepAlives per cell",
		Example: `  lockproxy --name p1 --listen 127.0.0.1:7201 --lockd 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
  lockctl --endpoints 127.0.0.1:7201 get /demo/x`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			slack, err := timerslack.For(slackUS)
			if err != nil {
				return fmt.Errorf("--timer-slack-us: %w", err)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			// First, before anything is opened or read: it may run the
			// binary again (its arguments are all it reads to get here).
			slackReport := timerslack.Ensure(slack, "")
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			slackReport.Log(cfg.Logger)
			for _, e := range strings.Split(lockds, ",") {
				if e = strings.TrimSpace(e); e != "" {
					cfg.Lockds = append(cfg.Lockds, e)
				}
			}
			if cfg.Name == "" || cfg.Listen == "" || len(cfg.Lockds) == 0 {
				return fmt.Errorf("--name, --listen and --lockd are required")
			}
			switch {
			case tlsFiles.Set() && plain:
				return fmt.Errorf("--plain-http and TLS files both given")
			case tlsFiles.Set():
				var err error
				if cfg.TLS, err = tlsFiles.Server(); err != nil {
					return err
				}
				if cfg.UpstreamTLS, err = tlsFiles.Client(); err != nil {
					return err
				}
			case !plain:
				return fmt.Errorf("no TLS: give --tls-cert, --tls-key and --tls-ca (lockd certs makes a development set), or --plain-http to run without (development only)")
			}
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				cfg.Token = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
			}
			if pprofAddr != "" {
				bound, stopPprof, err := servePprof(pprofAddr)
				if err != nil {
					return err
				}
				defer func() { _ = stopPprof() }()
				cfg.Logger.Info("profiles served", "addr", "http://"+bound+"/debug/pprof/")
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			p, err := startProxy(ctx, cfg)
			if err != nil {
				return err
			}
			cfg.Logger.Info("lockproxy serving", "name", cfg.Name, "addr", p.Addr(), "version", proxy.Version)
			<-ctx.Done()
			cfg.Logger.Info("lockproxy stopping")
			return p.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Name, "name", "", "the proxy's name in the directory (a-z, 0-9, -, _)")
	f.StringVar(&cfg.Listen, "listen", "", "client API address (host:port)")
	f.StringVar(&cfg.Advertise, "advertise", "", "address registered in the directory (default --listen)")
	f.StringVar(&cfg.Zone, "zone", "", "the proxy's zone")
	f.StringVar(&lockds, "lockd", "", "API addresses of lockd processes, comma-separated (the directory is learned from them)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&tlsFiles.Cert, "tls-cert", "", "the proxy's TLS certificate (PEM; server and client use, like a lockd's)")
	f.StringVar(&tlsFiles.Key, "tls-key", "", "the key of --tls-cert")
	f.StringVar(&tlsFiles.CA, "tls-ca", "", "the cluster's CA (PEM): clients must present certificates it signed, and so do the lockds")
	f.BoolVar(&plain, "plain-http", false, "serve clients and talk to the lockds without TLS (development only)")
	f.StringVar(&cfg.EtcdListen, "etcd-listen", "", "serve etcd's v3 gRPC API on this address (host:port; off when empty; docs/etcd.md), with the client TLS settings")
	f.StringVar(&cfg.EtcdAdvertise, "etcd-advertise", "", "the etcd address other gateways and MemberList give clients (default: --etcd-listen, its host taken from --advertise when it listens on every address)")
	f.StringVar(&cfg.EtcdDefaultPrefix, "etcd-default-prefix", "/etcd", "the path etcd keys without a leading \"/\" live under (\"\" refuses such keys)")
	f.DurationVar(&cfg.EtcdLockDelay, "etcd-lock-delay", 0, "lock-delay of locks taken through etcd's Lock service (0 to the API's maximum)")
	f.StringVar(&tokenFile, "token-file", "", "when the lockds require tokens: a file holding an admin token (the proxy renews every client's session and reads the tenants)")
	f.IntVar(&slackUS, "timer-slack-us", 0, "the OS timer slack of every thread, in µs (0: 1000; -1: the OS's own; at most 10000); Linux, where lockproxy re-executes itself once at start to set it")
	f.BoolVar(&cfg.ParkKeepAlives, "park-keepalives", false, "hold clients' KeepAlives without a goroutine: about half the memory per session held, for more CPU per KeepAlive (bench/RESULTS.md)")
	f.StringVar(&pprofAddr, "pprof-addr", "", "serve Go's profiles under /debug/pprof/ on this loopback address (host:port; off when empty)")
	return cmd
}

// startProxy starts the proxy, waiting for its lockds as long as it takes
// (they may start after it, or be down for a while): only a signal or an
// error that waiting cannot mend ends the wait.
func startProxy(ctx context.Context, cfg proxy.Config) (*proxy.Proxy, error) {
	for {
		attempt, cancel := context.WithTimeout(ctx, 30*time.Second)
		p, err := proxy.Start(attempt, cfg)
		cancel()
		if err == nil || !errors.Is(err, proxy.ErrLockdsUnreachable) || ctx.Err() != nil {
			return p, err
		}
		cfg.Logger.Warn("no lockd serves the directory yet; still trying", "lockds", cfg.Lockds, "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}
