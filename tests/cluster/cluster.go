package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/internal/tlsutil"
)

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
	if err := opts.writeAdminToken(); err != nil {
		return nil, err
	}
	transport, err := opts.makeTLS()
	if err != nil {
		return nil, err
	}
	c, err := newCluster(opts, transport)
	if err != nil {
		return nil, err
	}
	if err := c.layOutNodes(); err != nil {
		return nil, err
	}
	if opts.RaftDelay.Max > 0 {
		if err := c.startRelays(); err != nil {
			return c, err
		}
	}
	opts.Logf("testcluster: %d replicas in %s, deployment %d, rtt %d ms, lease %v",
		opts.Replicas, c.dir, c.deploymentID, opts.RTTMillisecond, opts.Lease)
	if err := c.startProcs(); err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	if err := c.waitAllHealthy(ctx); err != nil {
		return c, err
	}
	if opts.NoWait {
		return c, nil
	}
	if err := c.waitCellLeaders(ctx); err != nil {
		return c, err
	}
	if err := c.waitCodecFloor(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// writeAdminToken, with AdminToken set, writes it to a file in Dir and adds
// --admin-token-file to ExtraArgs.
func (o *Options) writeAdminToken() error {
	if o.AdminToken == "" {
		return nil
	}
	dir, err := os.MkdirTemp(o.Dir, "auth-")
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(file, []byte(o.AdminToken+"\n"), 0o600); err != nil {
		return err
	}
	o.ExtraArgs = append(slices.Clone(o.ExtraArgs), "--admin-token-file", file)
	o.tokenFile = file
	return nil
}

// makeTLS, with TLS set, makes the development CAs (the API's and Raft's)
// in Dir; it returns the harness's HTTP transport, with the API's client
// certificate under TLS.
func (o *Options) makeTLS() (http.RoundTripper, error) {
	if !o.TLS {
		return &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}, nil
	}
	dir, err := os.MkdirTemp(o.Dir, "tls-")
	if err != nil {
		return nil, err
	}
	if o.tlsNode, o.tlsClient, err = tlsutil.DevCA(dir, []string{"127.0.0.1", "localhost"}); err != nil {
		return nil, err
	}
	if o.tlsRaft, err = tlsutil.DevRaftCA(dir, []string{"127.0.0.1", "localhost"}); err != nil {
		return nil, err
	}
	tc, err := o.tlsClient.Client()
	if err != nil {
		return nil, err
	}
	return &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second, TLSClientConfig: tc}, nil
}

// newCluster is the cluster before its processes: the lockd binary, a
// fresh deployment id, the harness's HTTP client and the directory.
func newCluster(opts Options, transport http.RoundTripper) (*Cluster, error) {
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
	return c, nil
}

// layOutNodes gives every lockd its id, addresses (free ports on
// 127.0.0.1, or the Network's hosts) and data directory.
func (c *Cluster) layOutNodes() error {
	opts := c.opts
	lockds := max(opts.Lockds, opts.Replicas)
	ports, err := freePorts(3 * lockds)
	if err != nil {
		return err
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
			return err
		}
		p := &proc{node: n}
		if opts.RaftDelay.Max > 0 {
			p.raftListen = raftListen
		}
		c.procs = append(c.procs, p)
	}
	return nil
}

// startProcs starts every lockd process, in id order.
func (c *Cluster) startProcs() error {
	for _, p := range c.procs {
		if err := c.startProc(p); err != nil {
			return err
		}
	}
	return nil
}

// waitAllHealthy waits until every lockd answers /healthz, in id order.
func (c *Cluster) waitAllHealthy(ctx context.Context) error {
	for _, p := range c.procs {
		if err := c.waitHealthy(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// waitCellLeaders waits, until ctx's deadline, for every cell to have a
// ready leader.
func (c *Cluster) waitCellLeaders(ctx context.Context) error {
	for _, cell := range c.opts.Cells {
		id, err := c.WaitLeader(cell.Name, time.Until(deadlineOf(ctx)))
		if err != nil {
			return err
		}
		c.opts.Logf("testcluster: cell %s led by replica %d", cell.Name, id)
	}
	return nil
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
