package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProxyPkg is the main package of lockproxy, relative to the module root.
const ProxyPkg = "./proxy/cmd/lockproxy"

// ProxyBinary is the lockproxy binary the harness runs:
// $TESTCLUSTER_PROXY_BIN if set, else ./proxy/cmd/lockproxy built once
// per test binary (with MutantFlags).
func ProxyBinary() (string, error) {
	if p := os.Getenv("TESTCLUSTER_PROXY_BIN"); p != "" {
		return filepath.Abs(p)
	}
	return BuildBinary(ProxyPkg, MutantFlags()...)
}

// EtcdDefaultPrefix holds the etcd keys without a leading "/" at every
// harness proxy: a cell must serve it for such keys to work (tests give
// a cell the prefix /etcd).
const EtcdDefaultPrefix = "/etcd"

// Proxy is a lockproxy process the harness runs beside a cluster.
type Proxy struct {
	Name    string
	Addr    string
	LogPath string
	// EtcdAddr is where the proxy serves etcd's v3 API (--etcd-listen):
	// every harness proxy does, on a port of its own, keys without a
	// leading "/" under EtcdDefaultPrefix (docs/etcd.md).
	EtcdAddr string
	// Args are the lockproxy flags it was started with beyond the
	// harness's own (StartProxy), kept across a Restart.
	Args []string

	c    *Cluster
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProxy starts a lockproxy named name on a free loopback port, fed
// with the bootstrap lockds' addresses and given args besides, and waits
// until it serves and the directory lists it. The cluster's Close kills
// it.
func (c *Cluster) StartProxy(name string, args ...string) (*Proxy, error) {
	bin, err := ProxyBinary()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	p := &Proxy{Name: name, Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), EtcdAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		LogPath: filepath.Join(c.dir, name+".log"), Args: args, c: c}
	if err := p.start(bin); err != nil {
		return nil, err
	}
	c.proxyMu.Lock()
	c.proxies = append(c.proxies, p)
	c.proxyMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.waitProxyListed(ctx, p); err != nil {
		return p, err
	}
	return p, nil
}

func (p *Proxy) start(bin string) error {
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	eps := p.c.Endpoints()[:p.c.opts.Replicas]
	args := []string{"--name", p.Name, "--listen", p.Addr, "--lockd", strings.Join(eps, ","), "--log-level", p.c.opts.LogLevel,
		"--etcd-listen", p.EtcdAddr, "--etcd-default-prefix", EtcdDefaultPrefix}
	if p.c.opts.tokenFile != "" {
		args = append(args, "--token-file", p.c.opts.tokenFile)
	}
	args = append(args, p.c.tlsArgs()...)
	args = append(args, p.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := start(cmd); err != nil {
		f.Close()
		return fmt.Errorf("start proxy %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "=== testcluster: proxy %s (pid %d) exited at %s: %v\n", p.Name, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano), err)
		f.Close()
		close(done)
	}()
	p.c.opts.Logf("testcluster: proxy %s started (pid %d, api %s)", p.Name, cmd.Process.Pid, p.Addr)
	return nil
}

// waitProxyListed waits until the directory lists the proxy.
func (c *Cluster) waitProxyListed(ctx context.Context, p *Proxy) error {
	for attempt := 0; attempt < 1000; attempt++ {
		select {
		case <-p.done:
			return fmt.Errorf("proxy %s exited before it was listed", p.Name)
		default:
		}
		var dir struct {
			Proxies []struct {
				Name    string `json:"name"`
				APIAddr string `json:"api_addr"`
			} `json:"proxies"`
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, c.Scheme()+"://"+p.Addr+"/v1/directory", nil)
		resp, err := c.http.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if json.Unmarshal(b, &dir) == nil {
				for _, x := range dir.Proxies {
					if x.Name == p.Name && x.APIAddr == p.Addr {
						cancel()
						return nil
					}
				}
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return fmt.Errorf("proxy %s not in the directory: %w", p.Name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("proxy never listed")
}

// PID is the proxy's process id, 0 once it exited.
func (p *Proxy) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Kill sends SIGKILL to the proxy by PID and waits for it to exit.
func (p *Proxy) Kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	if !waitDone(done, 10*time.Second) {
		return fmt.Errorf("proxy %s did not exit 10s after SIGKILL", p.Name)
	}
	p.c.opts.Logf("testcluster: proxy %s killed", p.Name)
	return nil
}

// Restart starts a killed proxy again on the same address.
func (p *Proxy) Restart() error {
	bin, err := ProxyBinary()
	if err != nil {
		return err
	}
	if p.PID() != 0 {
		return fmt.Errorf("proxy %s is running", p.Name)
	}
	return p.start(bin)
}
