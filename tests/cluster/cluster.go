package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/internal/tlsutil"
)

// CellSpec is one cell of the cluster: a Raft shard with a replica on every
// process, serving Prefixes.
type CellSpec struct {
	Name     string
	ShardID  uint64
	Prefixes []string
	// Timing is the cell's own timing (api.ParseCellTiming's form, like
	// "heartbeat=500ms,election=5s,lease=30s"); "" for the lockds'.
	Timing string
}

// DefaultCells are the cells of `lockd dev`: demo on /demo, payments on /payments.
var DefaultCells = []CellSpec{
	{Name: "demo", ShardID: 1, Prefixes: []string{"/demo"}},
	{Name: "payments", ShardID: 2, Prefixes: []string{"/payments"}},
}

// Options configures a cluster. The zero value is a 5-replica test cluster.
type Options struct {
	// Replicas is 5 (default) or 3: the bootstrap members, which host the
	// directory group and the Cells.
	Replicas int
	// Lockds is the number of lockd processes (default Replicas); those
	// past Replicas join the members and host what the directory places
	// on them.
	Lockds int
	// Zones spreads the lockds over this many zones (--zone z1, z2, …),
	// lockd i in zone (i-1) mod Zones + 1; 0: no zones.
	Zones int
	// BalanceLeaders lets the directory's leader move cells' leaderships
	// to even them out (lockd's default). Off by default here: tests that
	// pick a leader and act on it want it to stay put.
	BalanceLeaders bool
	// RTTMillisecond is the Raft tick (--rtt-ms): heartbeats every tick,
	// elections after 10–20 ticks. Default 20 (elections in 200–400 ms);
	// 100 is production timing.
	RTTMillisecond int
	// Lease is the default session lease (--lease). Default 3s.
	Lease time.Duration
	// Cells default to DefaultCells.
	Cells []CellSpec
	// LogLevel is --log-level; default info.
	LogLevel string
	// ExtraArgs are appended to every `lockd serve` command line.
	ExtraArgs []string
	// AdminToken turns auth on: every lockd gets it as its bootstrap
	// admin token (--admin-token-file), and the harness sends it.
	AdminToken string
	tokenFile  string // where New wrote it
	// TLS runs every lockd and lockproxy with mutual TLS on the
	// development CAs New makes: the API's, and Raft's (a CA of its own,
	// --raft-tls-*); the harness and NewClient use the API's client
	// certificate. Without it the processes get --plain-http.
	TLS       bool
	tlsNode   tlsutil.Files
	tlsClient tlsutil.Files
	tlsRaft   tlsutil.Files
	// StartTimeout bounds Start: every process healthy and every cell led
	// by a ready leader. Default 60s.
	StartTimeout time.Duration
	// LeaderTimeout bounds LeaderOf. Default 10s.
	LeaderTimeout time.Duration
	// NoWait makes Start return once every process answers /healthz,
	// without waiting for leaders.
	NoWait bool
	// Dir is where data and logs go; by default a fresh temporary directory,
	// removed on Close unless TESTCLUSTER_KEEP=1. A given Dir is never removed.
	Dir string
	// Logf receives the harness's own progress lines (starts, kills, ...).
	Logf func(format string, args ...any)
	// RaftDelay, if set, puts a userspace relay (tests/cluster/relay, one
	// delayrelay process per replica, in its namespace with Network) in
	// front of every replica's Raft port that delays each chunk by Min to
	// Max in each direction: a cluster whose replicas are as far apart as
	// regions. Client traffic is not delayed.
	RaftDelay Delay
	// Network, if set, places every replica on its own host address and
	// wraps its command line (the chaos suite runs each replica in its own
	// network namespace: see Netns). Nil: every replica on 127.0.0.1.
	Network Network
}

func (o Options) withDefaults() Options {
	if o.Replicas == 0 {
		o.Replicas = 5
	}
	if o.RTTMillisecond == 0 {
		o.RTTMillisecond = 20
	}
	if o.Lease == 0 {
		o.Lease = 3 * time.Second
	}
	if len(o.Cells) == 0 {
		o.Cells = DefaultCells
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.LeaderTimeout == 0 {
		o.LeaderTimeout = 10 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Node describes one replica process. Its addresses and directories stay
// the same across restarts.
type Node struct {
	ID       int
	APIAddr  string
	RaftAddr string
	DataDir  string
	LogPath  string
}

type proc struct {
	node Node
	// raftListen is where the lockd binds Raft when a relay stands on
	// node.RaftAddr ("" otherwise).
	raftListen string

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil before the first start
	done   chan struct{} // closed when the current process has exited
	paused bool
	starts int
	exit   error
}

func (p *proc) runningLocked() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Cluster is a set of lockd processes serving the same cells.
type Cluster struct {
	opts         Options
	bin          string
	dir          string
	removeDir    bool
	deploymentID uint64
	procs        []*proc // index id-1
	relays       []*exec.Cmd
	http         *http.Client

	proxyMu sync.Mutex
	proxies []*Proxy

	closeOnce sync.Once
}

// Start starts a cluster for a test or benchmark and stops it (SIGKILL by
// PID) when t ends. On failure it prints the tail of every process's log.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	if opts.Dir == "" && os.Getenv("TESTCLUSTER_KEEP") != "1" {
		opts.Dir = t.TempDir()
	}
	c, err := New(opts)
	if err != nil {
		if c != nil {
			t.Log(c.LogTails(40))
			c.Close()
		}
		t.Fatalf("testcluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.LogTails(40))
		}
		c.Close()
	})
	return c
}

// New starts a cluster that lives until Close, for callers without a
// testing.TB (TestMain, lockbench). On error the returned cluster, if not
// nil, still holds the logs; Close it.
func New(opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if opts.Replicas != 3 && opts.Replicas != 5 {
		return nil, fmt.Errorf("replicas must be 3 or 5, not %d", opts.Replicas)
	}
	if opts.AdminToken != "" {
		dir, err := os.MkdirTemp(opts.Dir, "auth-")
		if err != nil {
			return nil, err
		}
		file := filepath.Join(dir, "admin.token")
		if err := os.WriteFile(file, []byte(opts.AdminToken+"\n"), 0o600); err != nil {
			return nil, err
		}
		opts.ExtraArgs = append(slices.Clone(opts.ExtraArgs), "--admin-token-file", file)
		opts.tokenFile = file
	}
	var transport http.RoundTripper = &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	if opts.TLS {
		dir, err := os.MkdirTemp(opts.Dir, "tls-")
		if err != nil {
			return nil, err
		}
		if opts.tlsNode, opts.tlsClient, err = tlsutil.DevCA(dir, []string{"127.0.0.1", "localhost"}); err != nil {
			return nil, err
		}
		if opts.tlsRaft, err = tlsutil.DevRaftCA(dir, []string{"127.0.0.1", "localhost"}); err != nil {
			return nil, err
		}
		tc, err := opts.tlsClient.Client()
		if err != nil {
			return nil, err
		}
		transport = &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second, TLSClientConfig: tc}
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		opts: opts, bin: bin, dir: opts.Dir,
		deploymentID: rand.Uint64N(1<<62) + 1,
		http:         &http.Client{Transport: withToken(transport, opts.AdminToken)},
	}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "testcluster-"); err != nil {
			return nil, err
		}
		c.removeDir = os.Getenv("TESTCLUSTER_KEEP") != "1"
	}
	lockds := max(opts.Lockds, opts.Replicas)
	ports, err := freePorts(3 * lockds)
	if err != nil {
		return nil, err
	}
	for i := 0; i < lockds; i++ {
		id := i + 1
		apiAddr := fmt.Sprintf("127.0.0.1:%d", ports[3*i])
		raftAddr := fmt.Sprintf("127.0.0.1:%d", ports[3*i+1])
		raftListen := fmt.Sprintf("127.0.0.1:%d", ports[3*i+2])
		if opts.Network != nil {
			apiAddr, raftAddr = networkAddrs(opts.Network, id)
			raftListen = net.JoinHostPort(opts.Network.Host(id), strconv.Itoa(NetworkRaftPort+1))
		}
		n := Node{
			ID:       id,
			APIAddr:  apiAddr,
			RaftAddr: raftAddr,
			DataDir:  filepath.Join(c.dir, fmt.Sprintf("replica-%d", id)),
			LogPath:  filepath.Join(c.dir, fmt.Sprintf("replica-%d.log", id)),
		}
		if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
			return nil, err
		}
		p := &proc{node: n}
		if opts.RaftDelay.Max > 0 {
			p.raftListen = raftListen
		}
		c.procs = append(c.procs, p)
	}
	if opts.RaftDelay.Max > 0 {
		if err := c.startRelays(); err != nil {
			return c, err
		}
	}
	opts.Logf("testcluster: %d replicas in %s, deployment %d, rtt %d ms, lease %v",
		opts.Replicas, c.dir, c.deploymentID, opts.RTTMillisecond, opts.Lease)
	for _, p := range c.procs {
		if err := c.startProc(p); err != nil {
			return c, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	for _, p := range c.procs {
		if err := c.waitHealthy(ctx, p); err != nil {
			return c, err
		}
	}
	if opts.NoWait {
		return c, nil
	}
	for _, cell := range opts.Cells {
		id, err := c.WaitLeader(cell.Name, time.Until(deadlineOf(ctx)))
		if err != nil {
			return c, err
		}
		opts.Logf("testcluster: cell %s led by replica %d", cell.Name, id)
	}
	return c, nil
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// freePorts finds n distinct free TCP ports on 127.0.0.1: it holds every
// listener open until all are found, then closes them.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *Cluster) args(id int) []string {
	p := c.procs[id-1].node
	args := []string{"serve",
		"--id", fmt.Sprint(id),
		"--data-dir", p.DataDir,
		"--lease", c.opts.Lease.String(),
		"--rtt-ms", fmt.Sprint(c.opts.RTTMillisecond),
		"--logdb", "tiny",
		"--deployment-id", fmt.Sprint(c.deploymentID),
		"--log-level", c.opts.LogLevel,
	}
	for _, q := range c.procs[:c.opts.Replicas] {
		args = append(args, "--peer", fmt.Sprintf("%d,%s,%s", q.node.ID, q.node.RaftAddr, q.node.APIAddr))
	}
	if id > c.opts.Replicas {
		args = append(args, "--raft-addr", p.RaftAddr, "--api-addr", p.APIAddr)
	}
	if l := c.procs[id-1].raftListen; l != "" {
		args = append(args, "--raft-listen", l)
	}
	if c.opts.Zones > 0 {
		args = append(args, "--zone", fmt.Sprintf("z%d", (id-1)%c.opts.Zones+1))
	}
	args = append(args, fmt.Sprintf("--balance-leaders=%v", c.opts.BalanceLeaders))
	for _, cell := range c.opts.Cells {
		spec := fmt.Sprintf("%s,%d,%s", cell.Name, cell.ShardID, strings.Join(cell.Prefixes, "+"))
		if cell.Timing != "" {
			spec += "," + cell.Timing
		}
		args = append(args, "--cell", spec)
	}
	args = append(args, c.tlsArgs()...)
	if c.opts.TLS {
		f := c.opts.tlsRaft
		args = append(args, "--raft-tls-cert", f.Cert, "--raft-tls-key", f.Key, "--raft-tls-ca", f.CA)
	}
	return append(args, c.opts.ExtraArgs...)
}

// tlsArgs are a lockd's or lockproxy's TLS flags: the node certificate,
// or plain HTTP.
func (c *Cluster) tlsArgs() []string {
	if !c.opts.TLS {
		return []string{"--plain-http"}
	}
	f := c.opts.tlsNode
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}
}

// Scheme is the API's URL scheme: https with TLS.
func (c *Cluster) Scheme() string {
	if c.opts.TLS {
		return "https"
	}
	return "http"
}

// ClientTLS are the files of a client certificate the cluster's CA signed
// (with TLS on).
func (c *Cluster) ClientTLS() tlsutil.Files { return c.opts.tlsClient }

// NodeTLS are the files of the API certificate the lockds and lockproxies
// present (with TLS on).
func (c *Cluster) NodeTLS() tlsutil.Files { return c.opts.tlsNode }

// RaftTLS are the files of the lockds' Raft certificate and the Raft CA
// (with TLS on).
func (c *Cluster) RaftTLS() tlsutil.Files { return c.opts.tlsRaft }

// ServeArgs is replica id's lockd command line after "serve": the flags a
// command that must describe the same lockd (lockd restore) is given.
func (c *Cluster) ServeArgs(id int) []string { return c.args(id)[1:] }

func (c *Cluster) proc(id int) (*proc, error) {
	if id < 1 || id > len(c.procs) {
		return nil, fmt.Errorf("no replica %d (have 1..%d)", id, len(c.procs))
	}
	return c.procs[id-1], nil
}

// startProc starts p's process; p must not be running.
func (c *Cluster) startProc(p *proc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("replica %d is already running", p.node.ID)
	}
	f, err := os.OpenFile(p.node.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "=== testcluster: start #%d of replica %d at %s\n", p.starts, p.node.ID, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, c.args(p.node.ID)...)
	if c.opts.Network != nil {
		prog, argv := c.opts.Network.Command(p.node.ID, c.bin, c.args(p.node.ID))
		cmd = exec.Command(prog, argv...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = p.node.DataDir
	if err := start(cmd); err != nil {
		f.Close()
		return fmt.Errorf("start replica %d: %w", p.node.ID, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.paused, p.exit = cmd, done, false, nil
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "=== testcluster: replica %d (pid %d) exited at %s: %v\n", p.node.ID, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		p.mu.Lock()
		p.exit = err
		p.mu.Unlock()
		close(done)
	}()
	c.opts.Logf("testcluster: replica %d started (pid %d, api %s)", p.node.ID, cmd.Process.Pid, p.node.APIAddr)
	return nil
}

// waitHealthy waits until p answers /healthz, failing early if it exits.
func (c *Cluster) waitHealthy(ctx context.Context, p *proc) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	url := c.Scheme() + "://" + p.node.APIAddr + "/healthz"
	for attempt := 0; attempt < 10_000; attempt++ {
		select {
		case <-done:
			return fmt.Errorf("replica %d exited before it was healthy: %v\n%s", p.node.ID, p.exitErr(), c.LogTail(p.node.ID, 30))
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
		resp, err := c.http.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %d not healthy: %w", p.node.ID, ctx.Err())
		case <-done:
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("replica %d not healthy after 10000 attempts", p.node.ID)
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// signal sends sig to the running process of replica id, by PID. It returns
// the channel closed on exit, or nil if the replica is not running.
func (c *Cluster) signal(id int, sig syscall.Signal) (<-chan struct{}, error) {
	p, err := c.proc(id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return nil, nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return nil, fmt.Errorf("signal %v to replica %d (pid %d): %w", sig, id, p.cmd.Process.Pid, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT, syscall.SIGKILL: // a killed process is no longer paused
		p.paused = false
	}
	return p.done, nil
}

func waitDone(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Kill sends SIGKILL to replica id and waits for it to exit. Killing a
// replica that is not running does nothing.
func (c *Cluster) Kill(id int) error {
	done, err := c.signal(id, syscall.SIGKILL)
	if err != nil || done == nil {
		return err
	}
	if !waitDone(done, 10*time.Second) {
		return fmt.Errorf("replica %d did not exit 10s after SIGKILL", id)
	}
	c.opts.Logf("testcluster: replica %d killed", id)
	return nil
}

// Stop sends SIGTERM to replica id (resuming it first if paused) and waits
// for it to exit; after 20s it is killed. Stopping a replica that is not
// running does nothing.
func (c *Cluster) Stop(id int) error {
	p, err := c.proc(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if paused {
		if err := c.Resume(id); err != nil {
			return err
		}
	}
	done, err := c.signal(id, syscall.SIGTERM)
	if err != nil || done == nil {
		return err
	}
	if !waitDone(done, 20*time.Second) {
		c.opts.Logf("testcluster: replica %d ignored SIGTERM for 20s; killing it", id)
		if err := c.Kill(id); err != nil {
			return err
		}
		return fmt.Errorf("replica %d did not stop within 20s of SIGTERM (killed)", id)
	}
	c.opts.Logf("testcluster: replica %d stopped (%v)", id, p.exitErr())
	return nil
}

// Restart starts replica id again with the same data directory and ports,
// stopping it first (SIGTERM) if it runs, and waits until it answers
// /healthz. It does not wait for it to catch up or for leaders.
func (c *Cluster) Restart(id int) error {
	p, err := c.proc(id)
	if err != nil {
		return err
	}
	if err := c.Stop(id); err != nil {
		return err
	}
	if err := c.startProc(p); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	return c.waitHealthy(ctx, p)
}

// Pause stops replica id with SIGSTOP: it keeps its sockets but answers
// nothing until Resume.
func (c *Cluster) Pause(id int) error {
	done, err := c.signal(id, syscall.SIGSTOP)
	if err == nil && done == nil {
		err = fmt.Errorf("replica %d is not running", id)
	}
	if err == nil {
		c.opts.Logf("testcluster: replica %d paused", id)
	}
	return err
}

// Resume continues a paused replica with SIGCONT.
func (c *Cluster) Resume(id int) error {
	done, err := c.signal(id, syscall.SIGCONT)
	if err == nil && done == nil {
		err = fmt.Errorf("replica %d is not running", id)
	}
	if err == nil {
		c.opts.Logf("testcluster: replica %d resumed", id)
	}
	return err
}

// StopAll stops every replica at once (SIGTERM, in parallel).
func (c *Cluster) StopAll() error {
	return c.each(c.Stop)
}

// KillAll kills every replica at once.
func (c *Cluster) KillAll() error {
	return c.each(c.Kill)
}

// StartAll starts every replica that is not running, in parallel, and waits
// until each answers /healthz (not for leaders: see WaitLeaders).
func (c *Cluster) StartAll() error {
	return c.each(func(id int) error {
		if c.Running(id) {
			return nil
		}
		return c.Restart(id)
	})
}

func (c *Cluster) each(f func(id int) error) error {
	errs := make([]error, len(c.procs))
	var wg sync.WaitGroup
	for i := range c.procs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = f(i + 1)
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close kills every process by PID and removes the cluster's directory
// (unless it was given or TESTCLUSTER_KEEP=1). It is safe to call twice.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		c.proxyMu.Lock()
		for _, p := range c.proxies {
			if p.PID() != 0 {
				_ = p.Kill()
			}
		}
		c.proxyMu.Unlock()
		_ = c.KillAll()
		for _, r := range c.relays {
			_ = r.Process.Kill()
			_ = r.Wait()
		}
		c.http.CloseIdleConnections()
		if c.removeDir {
			_ = os.RemoveAll(c.dir)
		} else if os.Getenv("TESTCLUSTER_KEEP") == "1" {
			c.opts.Logf("testcluster: data and logs kept in %s", c.dir)
		}
	})
}

// Running reports whether replica id's process runs (paused counts).
func (c *Cluster) Running(id int) bool {
	p, err := c.proc(id)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// Paused reports whether replica id is paused.
func (c *Cluster) Paused(id int) bool {
	p, err := c.proc(id)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked() && p.paused
}

// PID is the process id of replica id, 0 if it is not running.
func (c *Cluster) PID(id int) int {
	p, err := c.proc(id)
	if err != nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// IDs are the replica ids, 1..N.
func (c *Cluster) IDs() []int {
	ids := make([]int, len(c.procs))
	for i := range ids {
		ids[i] = i + 1
	}
	return ids
}

// Node describes replica id.
func (c *Cluster) Node(id int) Node {
	p, err := c.proc(id)
	if err != nil {
		return Node{}
	}
	return p.node
}

// APIAddr is the API address (host:port) of replica id.
func (c *Cluster) APIAddr(id int) string { return c.Node(id).APIAddr }

// IDOf returns the replica id serving API address addr, 0 if none.
func (c *Cluster) IDOf(addr string) int {
	for _, p := range c.procs {
		if p.node.APIAddr == addr {
			return p.node.ID
		}
	}
	return 0
}

// Endpoints are the API addresses of every replica, in id order.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.procs))
	for i, p := range c.procs {
		out[i] = p.node.APIAddr
	}
	return out
}

// Cells are the cluster's cells.
func (c *Cluster) Cells() []CellSpec { return append([]CellSpec(nil), c.opts.Cells...) }

// Options are the options the cluster runs with, defaults filled in.
func (c *Cluster) Options() Options { return c.opts }

// Dir is the cluster's data and log directory.
func (c *Cluster) Dir() string { return c.dir }

// NewClient returns a test client over every endpoint.
func (c *Cluster) NewClient() *Client {
	cl := NewClient(c.Endpoints()...)
	cl.Token = c.opts.AdminToken
	if c.opts.TLS {
		tc, err := c.opts.tlsClient.Client()
		if err != nil {
			panic(fmt.Sprintf("testcluster: client certificate: %v", err)) // New loaded it already
		}
		cl.UseTLS(tc)
	}
	return cl
}

// LogTail returns the last n lines of replica id's output.
func (c *Cluster) LogTail(id, n int) string {
	p, err := c.proc(id)
	if err != nil {
		return err.Error()
	}
	b, err := os.ReadFile(p.node.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 2*n+100 {
			lines = append(lines[:0], lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogTails returns the last n lines of every replica's output.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	ids := c.IDs()
	sort.Ints(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "----- replica %d (%s) last %d lines -----\n%s\n", id, c.Node(id).LogPath, n, c.LogTail(id, n))
	}
	return b.String()
}

// withToken makes every harness request carry token (when auth is on).
func withToken(base http.RoundTripper, token string) http.RoundTripper {
	if token == "" {
		return base
	}
	return tokenTransport{base: base, token: token}
}

type tokenTransport struct {
	base  http.RoundTripper
	token string
}

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}
