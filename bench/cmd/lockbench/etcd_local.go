package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdMembers is the local etcd cluster's size: lockd's local cluster's.
const etcdMembers = 5

// etcdPortAttempts bounds the tries for a peer port range apart from the
// client one.
const etcdPortAttempts = 10

// etcdLayout is where a local etcd cluster's members live: one data dir
// each under dir, client and peer ports on loopback from two bases.
type etcdLayout struct {
	dir        string
	clientBase int
	peerBase   int
	token      string // the cluster's --initial-cluster-token
}

func (l etcdLayout) name(i int) string { return fmt.Sprintf("m%d", i+1) }

func (l etcdLayout) clientURL(i int) string {
	return fmt.Sprintf("http://127.0.0.1:%d", l.clientBase+i)
}

func (l etcdLayout) peerURL(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", l.peerBase+i) }

// endpoints are the members' client addresses.
func (l etcdLayout) endpoints() []string {
	out := make([]string, etcdMembers)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", l.clientBase+i)
	}
	return out
}

// initialCluster is --initial-cluster: every member's name and peer URL.
func (l etcdLayout) initialCluster() string {
	parts := make([]string, etcdMembers)
	for i := range parts {
		parts[i] = l.name(i) + "=" + l.peerURL(i)
	}
	return strings.Join(parts, ",")
}

// args is member i's command line: production settings (etcd's default
// 100 ms heartbeat and 1 s election timeout, spelled out; etcd 3.4 always
// fsyncs), a data dir of its own, logs at warn.
func (l etcdLayout) args(i int) []string {
	return []string{
		"--name", l.name(i),
		"--data-dir", filepath.Join(l.dir, l.name(i)),
		"--listen-client-urls", l.clientURL(i), "--advertise-client-urls", l.clientURL(i),
		"--listen-peer-urls", l.peerURL(i), "--initial-advertise-peer-urls", l.peerURL(i),
		"--initial-cluster", l.initialCluster(), "--initial-cluster-state", "new",
		"--initial-cluster-token", l.token,
		"--heartbeat-interval", "100", "--election-timeout", "1000",
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
	}
}

// etcdCluster is a local five-member etcd cluster lockbench started.
type etcdCluster struct {
	layout  etcdLayout
	members []*etcdMember
}

// etcdMember is one running etcd process.
type etcdMember struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// startEtcd starts five etcd members on free loopback ports, each with its
// data under one new folder in dataDir ("": $TMPDIR), and waits until every
// member answers with a leader and a put commits.
func startEtcd(ctx context.Context, bin, dataDir string) (*etcdCluster, error) {
	bin, err := etcdBinary(bin)
	if err != nil {
		return nil, err
	}
	layout, err := newEtcdLayout(dataDir)
	if err != nil {
		return nil, err
	}
	ec := &etcdCluster{layout: layout}
	for i := 0; i < etcdMembers; i++ {
		m, err := startMember(bin, layout.args(i), filepath.Join(layout.dir, layout.name(i)+".log"))
		if err != nil {
			ec.stop()
			return nil, err
		}
		ec.members = append(ec.members, m)
	}
	// As generous as lockd's: five fsyncing members on a loaded machine.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := ec.waitHealthy(wctx); err != nil {
		return nil, ec.failed(err)
	}
	return ec, nil
}

// newEtcdLayout picks a new folder in dataDir and two free port ranges
// that do not overlap.
func newEtcdLayout(dataDir string) (etcdLayout, error) {
	clientBase, err := freePorts(etcdMembers)
	if err != nil {
		return etcdLayout{}, err
	}
	peerBase := clientBase
	for attempt := 0; peerBase < clientBase+etcdMembers && clientBase < peerBase+etcdMembers; attempt++ {
		if attempt == etcdPortAttempts {
			return etcdLayout{}, errors.New("no two free port ranges for etcd")
		}
		if peerBase, err = freePorts(etcdMembers); err != nil {
			return etcdLayout{}, err
		}
	}
	dir, err := os.MkdirTemp(dataDir, "lockbench-etcd-")
	if err != nil {
		return etcdLayout{}, err
	}
	return etcdLayout{dir: dir, clientBase: clientBase, peerBase: peerBase, token: filepath.Base(dir)}, nil
}

// etcdBinary is path if set, else etcd on PATH, else Debian's /usr/bin/etcd.
func etcdBinary(path string) (string, error) {
	if path == "" {
		if p, err := exec.LookPath("etcd"); err == nil {
			return p, nil
		}
		path = "/usr/bin/etcd"
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("etcd binary: %w (apt-get install etcd-server, or pass --etcd)", err)
	}
	return path, nil
}

// startMember starts one etcd with its output in logPath; it dies with
// lockbench.
func startMember(bin string, args []string, logPath string) (*etcdMember, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	m := &etcdMember{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(m.exited) }()
	return m, nil
}

// waitHealthy polls until every member reports a leader and a put commits.
func (ec *etcdCluster) waitHealthy(ctx context.Context) error {
	c, err := dial(ec.layout.endpoints())
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		err := ec.healthy(ctx, c)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd cluster not healthy: %w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// healthy is nil when every member is running and knows a leader and a
// put commits.
func (ec *etcdCluster) healthy(ctx context.Context, c *clientv3.Client) error {
	for i, m := range ec.members {
		select {
		case <-m.exited:
			return fmt.Errorf("etcd member %s exited", ec.layout.name(i))
		default:
		}
	}
	for _, ep := range ec.layout.endpoints() {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := c.Status(sctx, ep)
		cancel()
		if err != nil {
			return err
		}
		if st.Leader == 0 {
			return fmt.Errorf("%s: no leader yet", ep)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.Put(pctx, "/lockbench-ready", "1")
	return err
}

// pids are the members' process ids.
func (ec *etcdCluster) pids() []int {
	out := make([]int, len(ec.members))
	for i, m := range ec.members {
		out[i] = m.cmd.Process.Pid
	}
	return out
}

// failed stops a cluster that did not come up and returns err with the end
// of each member's log (stop removes them with the data).
func (ec *etcdCluster) failed(err error) error {
	var b strings.Builder
	for i, m := range ec.members {
		data, _ := os.ReadFile(m.log)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "--- %s:\n%s\n", ec.layout.name(i), strings.Join(lines[max(0, len(lines)-10):], "\n"))
	}
	ec.stop()
	return fmt.Errorf("local etcd cluster: %w\nthe last lines of its logs:\n%s", err, b.String())
}

// stop ends every member by PID (SIGTERM, SIGKILL after 30 s) and removes
// the data.
func (ec *etcdCluster) stop() {
	for _, m := range ec.members {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	late := false
	for _, m := range ec.members {
		if !late {
			select {
			case <-m.exited:
				continue
			case <-deadline.C:
				late = true
			}
		}
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	_ = os.RemoveAll(ec.layout.dir)
}
