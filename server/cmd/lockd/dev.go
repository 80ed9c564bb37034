package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lockservice/lockd/internal/tlsutil"
	"github.com/spf13/cobra"
)

// devCluster is the local cluster `make run` starts: six lockd processes
// on loopback in three zones; the first five host the directory group and
// the bootstrap cells demo and payments, and every further cell is created
// through the directory, which places it over all six.
type devCluster struct {
	dataDir  string
	lease    time.Duration
	replicas int
	lockds   int
	zones    int
	apiBase  int
	raftBase int
	rttMS    int
	pprof    bool
	// proxyPprofBase: proxy i serves its profiles on proxyPprofBase+i-1 (0: none).
	proxyPprofBase int
	logdb          string
	timerSlackUS   int // passed to every lockd serve, and to every lockproxy when not 0
	cells          int
	// proxies lockproxy processes on proxyBase, proxyBase+1, ...
	proxies   int
	proxyBase int
	proxyBin  string
	// parkKeepAlives: every lockproxy parks its clients' held KeepAlives.
	parkKeepAlives bool
	// etcd: proxy i also serves etcd's v3 API on etcdBase+100*(i-1)
	// (2379, 2479, ...), keys without a leading "/" under
	// devEtcdDefaultPrefix (docs/etcd.md).
	etcd     bool
	etcdBase int
	// auth: the lockds require tokens; tokenFile holds the admin token
	// (made once in the data directory, kept across restarts).
	auth      bool
	tokenFile string
	// tls: development CAs and certificates in DATA_DIR/tls; node and
	// client are the API's files, raft the lockds' Raft files on a CA of
	// their own (unset: plain HTTP).
	tls                bool
	node, client, raft tlsutil.Files
	http               *http.Client // the supervisor's own calls (cell creation)
}

func devCommand() *cobra.Command {
	d := devCluster{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster: six lockd processes on loopback, the directory and three cells (/demo, /payments, /cell3)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return d.run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&d.dataDir, "data-dir", "./.lockd-dev", "where the replicas keep their data (kept across restarts)")
	f.DurationVar(&d.lease, "lease", 12*time.Second, "default session lease")
	f.IntVar(&d.replicas, "replicas", 5, "replicas per cell (5, or 3); the first this many lockds host the directory and the bootstrap cells")
	f.IntVar(&d.lockds, "lockds", 6, "lockd processes (at least --replicas)")
	f.IntVar(&d.zones, "zones", 3, "zones the lockds are spread over (lockd i is in zone z((i-1) mod zones + 1))")
	f.IntVar(&d.apiBase, "api-port", 7001, "API port of lockd 1; lockd i listens on api-port+i-1")
	f.IntVar(&d.raftBase, "raft-port", 7101, "Raft port of lockd 1")
	f.IntVar(&d.rttMS, "rtt-ms", 100, "Raft tick in ms")
	f.IntVar(&d.cells, "cells", 3, "cells to run: demo (/demo) and payments (/payments) from the bootstrap flags, then cell3 (/cell3) and on, each created through the directory and placed over the lockds")
	f.BoolVar(&d.pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on every replica's API port")
	f.IntVar(&d.proxyPprofBase, "proxy-pprof-port", 0, "proxy i serves Go profiles under /debug/pprof/ on 127.0.0.1:(this+i-1); 0 for none")
	f.IntVar(&d.proxies, "proxies", 2, "lockproxy processes to run (clients send through them by default); 0 for none")
	f.IntVar(&d.proxyBase, "proxy-port", 7201, "API port of proxy 1; proxy i listens on proxy-port+i-1")
	f.BoolVar(&d.parkKeepAlives, "proxy-park-keepalives", false, "the proxies hold their clients' KeepAlives without a goroutine (lockproxy --park-keepalives: less memory, more CPU)")
	f.StringVar(&d.proxyBin, "proxy-bin", "", "the lockproxy binary (default: lockproxy beside this lockd)")
	f.BoolVar(&d.etcd, "etcd", false, "the proxies also serve etcd's v3 API (etcdctl, etcd clients): proxy 1 on 127.0.0.1:2379, proxy 2 on :2479, ...; keys without a leading / live under "+devEtcdDefaultPrefix)
	f.IntVar(&d.etcdBase, "etcd-port", 2379, "etcd port of proxy 1, with --etcd; proxy i serves on etcd-port+100*(i-1)")
	f.BoolVar(&d.tls, "tls", false, "run mutual TLS everywhere: development CAs and certificates are made in DATA_DIR/tls, the API's and, on a CA of its own, Raft's (lockctl --tls-ca/--tls-cert/--tls-key with its client.pem)")
	f.BoolVar(&d.auth, "auth", false, "require API tokens: an admin token is made in DATA_DIR/admin.token (lockctl --auth-token $(cat it)); tenants with lockctl tenant")
	f.StringVar(&d.logdb, "logdb", "tiny", "LogDB memory preset of every replica (tiny keeps five replicas small; small is lockd serve's default)")
	f.IntVar(&d.timerSlackUS, "timer-slack-us", 0, "every replica's and proxy's --timer-slack-us (0: their default, 1000; -1: the OS's own; passed to the proxies only when not 0, and a --proxy-bin older than the flag then refuses it)")
	return cmd
}

func (d devCluster) args(id int) []string {
	args := []string{"serve",
		"--id", fmt.Sprint(id),
		"--data-dir", filepath.Join(d.dataDir, fmt.Sprintf("replica-%d", id)),
		"--lease", d.lease.String(),
		"--rtt-ms", fmt.Sprint(d.rttMS),
		"--logdb", d.logdb,
		"--timer-slack-us", fmt.Sprint(d.timerSlackUS),
		// The audit log of each lockd, beside its data (docs: "Audit log").
		"--audit-file", filepath.Join(d.dataDir, fmt.Sprintf("replica-%d", id), "audit.log"),
	}
	args = append(args, d.tlsArgs()...)
	if d.tls {
		args = append(args, "--raft-tls-cert", d.raft.Cert, "--raft-tls-key", d.raft.Key, "--raft-tls-ca", d.raft.CA)
	}
	for _, c := range d.cellSpecs() {
		args = append(args, "--cell", c)
	}
	for i := 1; i <= d.replicas; i++ {
		args = append(args, "--peer", fmt.Sprintf("%d,127.0.0.1:%d,127.0.0.1:%d", i, d.raftBase+i-1, d.apiBase+i-1))
	}
	if id > d.replicas {
		args = append(args, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", d.raftBase+id-1), "--api-addr", fmt.Sprintf("127.0.0.1:%d", d.apiBase+id-1))
	}
	if d.zones > 0 {
		args = append(args, "--zone", fmt.Sprintf("z%d", (id-1)%d.zones+1))
	}
	if d.pprof {
		args = append(args, "--pprof")
	}
	if d.tokenFile != "" {
		args = append(args, "--admin-token-file", d.tokenFile)
	}
	return args
}

// cellSpecs names the bootstrap cells as --cell takes them: NAME,SHARD,PREFIX.
func (d devCluster) cellSpecs() []string {
	var out []string
	for i := 1; i <= min(d.cells, 2); i++ {
		name := fmt.Sprintf("cell%d", i)
		switch i {
		case 1:
			name = "demo"
		case 2:
			name = "payments"
		}
		out = append(out, fmt.Sprintf("%s,%d,/%s", name, i, name))
	}
	return out
}

// ports lists every address the replicas will listen on.
func (d devCluster) ports() []portUse {
	var out []portUse
	for i := 1; i <= d.lockds; i++ {
		out = append(out,
			portUse{addr: fmt.Sprintf("127.0.0.1:%d", d.apiBase+i-1), kind: "api", replica: uint64(i)},
			portUse{addr: fmt.Sprintf("127.0.0.1:%d", d.raftBase+i-1), kind: "raft", replica: uint64(i)})
	}
	for i := 1; i <= d.proxies; i++ {
		out = append(out, portUse{addr: d.proxyAddr(i), kind: "proxy", replica: uint64(i)})
		if d.etcd {
			out = append(out, portUse{addr: d.etcdAddr(i), kind: "etcd", replica: uint64(i)})
		}
		if d.proxyPprofBase > 0 {
			out = append(out, portUse{addr: d.proxyPprofAddr(i), kind: "pprof", replica: uint64(i)})
		}
	}
	return out
}

// devEtcdDefaultPrefix holds the dev cluster's etcd keys without a
// leading "/": a directory in /demo, a prefix the dev cluster always
// serves (key "foo" is /demo/etcd/foo; "/payments/x" is itself).
const devEtcdDefaultPrefix = "/demo/etcd"

// etcdAddr is proxy i's etcd address (with --etcd).
func (d devCluster) etcdAddr(i int) string {
	return fmt.Sprintf("127.0.0.1:%d", d.etcdBase+100*(i-1))
}

func (d devCluster) proxyAddr(i int) string { return fmt.Sprintf("127.0.0.1:%d", d.proxyBase+i-1) }

// proxyPprofAddr is proxy i's profiles address (with --proxy-pprof-port).
func (d devCluster) proxyPprofAddr(i int) string {
	return fmt.Sprintf("127.0.0.1:%d", d.proxyPprofBase+i-1)
}

// proxyArgs are proxy i's flags: it learns the directory from the
// bootstrap lockds, and is in zone i like the lockds.
func (d devCluster) proxyArgs(i int) []string {
	args := []string{"--name", fmt.Sprintf("proxy-%d", i), "--listen", d.proxyAddr(i),
		"--lockd", strings.Join(d.endpoints()[:d.replicas], ",")}
	if d.zones > 0 {
		args = append(args, "--zone", fmt.Sprintf("z%d", (i-1)%d.zones+1))
	}
	if d.tokenFile != "" {
		args = append(args, "--token-file", d.tokenFile)
	}
	if d.etcd {
		args = append(args, "--etcd-listen", d.etcdAddr(i), "--etcd-default-prefix", devEtcdDefaultPrefix)
	}
	if d.proxyPprofBase > 0 {
		args = append(args, "--pprof-addr", d.proxyPprofAddr(i))
	}
	if d.parkKeepAlives {
		args = append(args, "--park-keepalives")
	}
	if d.timerSlackUS != 0 { // only when set: a --proxy-bin older than the flag still runs
		args = append(args, "--timer-slack-us", fmt.Sprint(d.timerSlackUS))
	}
	return append(args, d.tlsArgs()...)
}

// tlsArgs are the API TLS flags of every lockd and lockproxy: the node
// certificate, or plain HTTP. A lockd gets the Raft files too (args).
func (d devCluster) tlsArgs() []string {
	if !d.tls {
		return []string{"--plain-http"}
	}
	return []string{"--tls-cert", d.node.Cert, "--tls-key", d.node.Key, "--tls-ca", d.node.CA}
}

func (d devCluster) endpoints() []string {
	var out []string
	for i := 1; i <= d.lockds; i++ {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", d.apiBase+i-1))
	}
	return out
}

// run is `lockd dev`: it starts the lockds and the proxies, creates the
// cells past the bootstrap ones and prints "ready" once everything
// serves, and on SIGINT or SIGTERM stops the proxies, then the lockds.
func (d *devCluster) run() error {
	if err := d.checkFlags(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := d.prepare(); err != nil {
		return err
	}
	proxyBin, err := d.lockproxyBin(self)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	superviseFromMainThread()

	s := newDevProcs(d.lockds + d.proxies)
	if err := d.startLockds(s, self); err != nil {
		return err
	}
	if err := d.startProxies(s, proxyBin); err != nil {
		return err
	}
	d.printBanner()
	ready := d.bootstrap(ctx)
	return d.supervise(ctx, s, ready)
}

// checkFlags rejects a cluster `lockd dev` does not run.
func (d *devCluster) checkFlags() error {
	if d.replicas != 5 && d.replicas != 3 {
		return fmt.Errorf("--replicas must be 5 or 3")
	}
	if d.cells < 1 || d.cells > 64 {
		return fmt.Errorf("--cells must be 1 to 64")
	}
	if d.lockds < d.replicas || d.lockds > 64 {
		return fmt.Errorf("--lockds must be from --replicas (%d) to 64", d.replicas)
	}
	return nil
}

// prepare makes the data directory, checks that every port is free, makes
// the admin token (--auth) and the certificates (--tls), and sets up the
// supervisor's own HTTP client.
func (d *devCluster) prepare() error {
	if err := os.MkdirAll(d.dataDir, 0o755); err != nil {
		return err
	}
	if err := checkPorts(d.ports()); err != nil {
		return err
	}
	if d.auth {
		if err := d.adminToken(); err != nil {
			return fmt.Errorf("admin token: %w", err)
		}
	}
	d.http = &http.Client{Timeout: 10 * time.Second}
	if d.tls {
		if err := d.makeCerts(); err != nil {
			return err
		}
	}
	return nil
}

// lockproxyBin is the lockproxy binary to run (--proxy-bin, or lockproxy
// beside self); with --proxies 0 it need not exist.
func (d *devCluster) lockproxyBin(self string) (string, error) {
	proxyBin := d.proxyBin
	if d.proxies > 0 && proxyBin == "" {
		proxyBin = filepath.Join(filepath.Dir(self), "lockproxy")
	}
	if d.proxies > 0 {
		if _, err := os.Stat(proxyBin); err != nil {
			return "", fmt.Errorf("--proxies %d needs the lockproxy binary: %w (make build puts it beside lockd; or --proxies 0)", d.proxies, err)
		}
	}
	return proxyBin, nil
}

// startLockds starts lockd 1 to --lockds, running self.
func (d *devCluster) startLockds(s *devProcs, self string) error {
	for id := 1; id <= d.lockds; id++ {
		if err := s.start(fmt.Sprintf("replica-%d", id), self, d.args(id)); err != nil {
			return err
		}
	}
	return nil
}

// startProxies starts proxy 1 to --proxies.
func (d *devCluster) startProxies(s *devProcs, proxyBin string) error {
	for i := 1; i <= d.proxies; i++ {
		if err := s.start(fmt.Sprintf("proxy-%d", i), proxyBin, d.proxyArgs(i)); err != nil {
			return err
		}
	}
	return nil
}

// printBanner says what was started and how to reach it.
func (d *devCluster) printBanner() {
	fmt.Printf("lockd dev cluster: %d lockds in %d zones, bootstrap cells (name,shard,prefix) %s on lockds 1-%d, data in %s\n", d.lockds, d.zones, strings.Join(d.cellSpecs(), " "), d.replicas, d.dataDir)
	fmt.Printf("endpoints: %s\n", strings.Join(d.endpoints(), ","))
	if d.proxies > 0 {
		var addrs []string
		for i := 1; i <= d.proxies; i++ {
			addrs = append(addrs, d.proxyAddr(i))
		}
		fmt.Printf("proxies: %s (clients send through them; lockctl --direct to bypass)\n", strings.Join(addrs, ","))
	}
	if d.etcd && d.proxies > 0 {
		var addrs []string
		for i := 1; i <= d.proxies; i++ {
			addrs = append(addrs, d.etcdAddr(i))
		}
		fmt.Printf("etcd v3: %s (etcdctl --endpoints %s; keys without a leading / live under %s)\n", strings.Join(addrs, ","), strings.Join(addrs, ","), devEtcdDefaultPrefix)
	}
	if d.auth {
		fmt.Printf("auth: tokens required; admin token in %s (export LOCKCTL_AUTH_TOKEN=$(cat %s))\n", d.tokenFile, d.tokenFile)
	}
	if d.tls {
		fmt.Printf("tls: mutual TLS; clients: lockctl --tls-ca %s --tls-cert %s --tls-key %s\n", d.client.CA, d.client.Cert, d.client.Key)
	}
}

// bootstrap, in the background, creates the cells past the bootstrap ones
// and waits until the cluster is ready (waitReady); the channel it returns
// gets the outcome.
func (d *devCluster) bootstrap(ctx context.Context) <-chan error {
	created := make(chan error, 1)
	go func() {
		if err := d.createCells(ctx); err != nil {
			created <- fmt.Errorf("creating cells: %w", err)
			return
		}
		created <- d.waitReady(ctx)
	}()
	return created
}

// printReady says the cluster is ready, or why it is not.
func (d *devCluster) printReady(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "not ready: %v\n", err)
		return
	}
	fmt.Printf("ready: %d cells serve %s; %d proxies answer. Try: lockctl cells; lockctl put /demo/hello world; lockctl get /demo/hello\n",
		d.cells, strings.Join(d.prefixes(), " "), d.proxies)
}

// supervise runs until every process has exited: it reports each exit and
// the outcome of ready, and on the signal (ctx done) shuts the cluster
// down.
func (d *devCluster) supervise(ctx context.Context, s *devProcs, ready <-chan error) error {
	alive := d.lockds + d.proxies
	for alive > 0 {
		select {
		case <-ctx.Done():
			return d.shutdown(s, alive)
		case name := <-s.exits:
			alive--
			fmt.Fprintf(os.Stderr, "%s exited; %d still running\n", name, alive)
		case err := <-ready:
			ready = nil
			d.printReady(err)
		}
	}
	s.wg.Wait()
	return nil
}

// shutdown stops the proxies, then the lockds, and waits for the alive
// processes to exit; after 15s it kills every one.
func (d *devCluster) shutdown(s *devProcs, alive int) error {
	fmt.Println("stopping the dev cluster")
	alive -= d.stopProxies(s)
	for _, p := range s.procs[:d.lockds] {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	return s.waitExits(alive, 15*time.Second)
}

// stopProxies stops the proxies first: stopped after the lockds, each
// retried its calls to them and logged giving up on the way down. It
// returns how many exits it received.
func (d *devCluster) stopProxies(s *devProcs) int {
	if n := stopFirst(s.procs[d.lockds:], s.exits, devProxyStop); d.proxies > 0 {
		fmt.Printf("%d of %d proxies stopped; stopping the lockds\n", n, d.proxies)
		return n
	}
	return 0
}
