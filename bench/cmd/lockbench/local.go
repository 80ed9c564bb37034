package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lockservice/lockd/sdk"
)

// localCluster is a `lockd dev` cluster lockbench started itself: real
// processes, fsync on, production timing (100 ms ticks, 12 s lease).
type localCluster struct {
	cmd        *exec.Cmd
	dir        string
	endpoints  []string
	adminToken string // with auth: lockd dev's admin token
	exited     chan struct{}
}

// localSpec is the local cluster --start runs: the lockd binary ("":
// beside lockbench), where its data goes ("": $TMPDIR), and `lockd dev`'s
// settings.
type localSpec struct {
	lockd, dataDir string
	lease          time.Duration
	cells          int
	logdb          string
	timerSlackUS   int
	proxies        int
	auth           bool
	// parkKeepAlives: the proxies park their clients' held KeepAlives
	// (lockproxy --park-keepalives).
	parkKeepAlives bool
}

// startLocal runs `lockd dev` with five replicas on free loopback ports and
// waits until every replica answers /v1/status.
// Its data goes in a new folder under spec.dataDir.
func startLocal(ctx context.Context, spec localSpec) (*localCluster, error) {
	lockd, proxyBin, err := localBinaries(spec.lockd, spec.proxies)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(spec.dataDir, "lockbench-")
	if err != nil {
		return nil, err
	}
	const replicas = 5
	cells, proxies, auth := spec.cells, spec.proxies, spec.auth
	apiBase, args, err := devArgs(dir, replicas, proxyBin, spec)
	if err != nil {
		return nil, err
	}
	lc, err := runDev(lockd, args, dir)
	if err != nil {
		return nil, err
	}
	for i := 0; i < replicas; i++ {
		lc.endpoints = append(lc.endpoints, fmt.Sprintf("127.0.0.1:%d", apiBase+i))
	}
	// Generous: on a loaded 2-core machine five fsyncing replicas can take
	// a minute or more to elect and serve.
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if auth {
		if err := lc.waitAdminToken(wctx); err != nil {
			return nil, err
		}
	}
	if err := lc.waitServing(wctx, cells, proxies); err != nil {
		return nil, lc.failed(err)
	}
	return lc, nil
}

// localBinaries finds lockd (and lockproxy, if proxies are asked for).
func localBinaries(lockd string, proxies int) (lockdBin, proxyBin string, err error) {
	lockdBin, err = binary(lockd, "lockd")
	if err != nil {
		return "", "", err
	}
	if proxies > 0 {
		if proxyBin, err = binary("", "lockproxy"); err != nil {
			return "", "", err
		}
	}
	return lockdBin, proxyBin, nil
}

// devArgs is the `lockd dev` command line for a cluster in dir on free
// loopback ports; apiBase is the first replica's API port.
func devArgs(dir string, replicas int, proxyBin string, spec localSpec) (apiBase int, args []string, err error) {
	apiBase, err = freePorts(replicas)
	if err != nil {
		return 0, nil, err
	}
	raftBase, err := freePorts(replicas)
	if err != nil {
		return 0, nil, err
	}
	args = []string{"dev", "--data-dir", dir, "--replicas", fmt.Sprint(replicas), "--lockds", fmt.Sprint(replicas),
		"--api-port", fmt.Sprint(apiBase), "--raft-port", fmt.Sprint(raftBase), "--lease", spec.lease.String(), "--pprof", "--cells", fmt.Sprint(spec.cells), "--logdb", spec.logdb, "--timer-slack-us", fmt.Sprint(spec.timerSlackUS),
		"--proxies", fmt.Sprint(spec.proxies)}
	if spec.proxies > 0 {
		proxyBase, err := freePorts(spec.proxies)
		if err != nil {
			return 0, nil, err
		}
		args = append(args, "--proxy-bin", proxyBin, "--proxy-port", fmt.Sprint(proxyBase))
		if spec.parkKeepAlives {
			args = append(args, "--proxy-park-keepalives")
		}
	}
	if spec.auth {
		args = append(args, "--auth")
	}
	return apiBase, args, nil
}

// runDev starts `lockd dev`, its output to lockd-dev.log in dir.
func runDev(lockd string, args []string, dir string) (*localCluster, error) {
	cmd := exec.Command(lockd, args...)
	logf, err := os.Create(filepath.Join(dir, "lockd-dev.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lc := &localCluster{cmd: cmd, dir: dir, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(lc.exited) }()
	return lc, nil
}

// waitAdminToken waits for the admin token lockd dev --auth writes before
// it starts the lockds; on time out it stops the cluster.
func (lc *localCluster) waitAdminToken(ctx context.Context) error {
	for lc.adminToken == "" {
		b, err := os.ReadFile(filepath.Join(lc.dir, "admin.token"))
		if tok := strings.TrimSpace(string(b)); err == nil && tok != "" {
			lc.adminToken = tok
			break
		}
		select {
		case <-ctx.Done():
			lc.stop()
			return fmt.Errorf("lockd dev --auth wrote no admin token: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// waitServing waits until every replica answers its status, every cell
// serves and the proxies answer.
func (lc *localCluster) waitServing(ctx context.Context, cells, proxies int) error {
	for _, ep := range lc.endpoints {
		if err := waitStatus(ctx, ep, lc.adminToken, lc.exited); err != nil {
			return err
		}
	}
	if err := waitCells(ctx, lc.endpoints, lc.adminToken, localPrefixes(cells)); err != nil {
		return err
	}
	return waitProxies(ctx, lc.endpoints[0], lc.adminToken, proxies)
}

// failed stops a cluster that did not come up and returns err with the end
// of its log, which stop removes with the data.
func (lc *localCluster) failed(err error) error {
	b, _ := os.ReadFile(filepath.Join(lc.dir, "lockd-dev.log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-40):]
	lc.stop()
	return fmt.Errorf("local cluster: %w\nthe last lines of its log:\n%s", err, strings.Join(lines, "\n"))
}

// stop ends the cluster by PID (SIGTERM: replicas hand off leadership and
// exit; they die with `lockd dev` in any case) and removes its data.
func (lc *localCluster) stop() {
	_ = lc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-lc.exited:
	case <-time.After(30 * time.Second):
		_ = lc.cmd.Process.Kill()
		<-lc.exited
	}
	_ = os.RemoveAll(lc.dir)
}

func waitStatus(ctx context.Context, ep, token string, exited <-chan struct{}) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ep+"/v1/status", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("lockd dev exited")
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer /v1/status: %w", ep, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// portRun, when --port-base sets it, hands out the caller's reserved run
// of ports in order instead of drawing them (tests reserve runs that no
// other test of the machine can draw).
var portRun struct{ next int }

// freePorts finds n consecutive free ports on 127.0.0.1.
func freePorts(n int) (int, error) {
	if portRun.next > 0 {
		base := portRun.next
		portRun.next += n
		if err := bindable(base, n); err != nil {
			return 0, fmt.Errorf("--port-base: %w", err)
		}
		return base, nil
	}
	for attempt := 0; attempt < maxPortDraws; attempt++ {
		base := 20000 + rand.IntN(30000)
		if bindable(base, n) == nil {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports in %d draws", n, maxPortDraws)
}

// maxPortDraws bounds the random runs freePorts tries.
const maxPortDraws = 200

// bindable reports the first of ports base..base+n-1 that 127.0.0.1
// cannot bind now, if any.
func bindable(base, n int) error {
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
		if err != nil {
			return fmt.Errorf("port %d: %w", base+i, err)
		}
		_ = ln.Close()
	}
	return nil
}

// binary is path if set, else the named command beside lockbench (where
// make build puts them all); it must exist.
func binary(path, name string) (string, error) {
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		path = filepath.Join(filepath.Dir(self), name)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s binary: %w (build it with make build, or pass --%s)", name, err, name)
	}
	return path, nil
}

// waitProxies waits until the directory lists n proxies.
func waitProxies(ctx context.Context, ep, token string, n int) error {
	for n > 0 {
		if d, err := sdk.FetchDirectory(ctx, ep, sdk.Access{AuthToken: token}); err == nil && len(d.Proxies) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the directory does not list %d proxies: %w", n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// waitCells waits until every prefix is in the directory and served (the
// cells past the first two are created through the directory after start).
func waitCells(ctx context.Context, endpoints []string, token string, prefixes []string) error {
	c, err := sdk.New(ctx, sdk.Config{Endpoints: endpoints, AuthToken: token})
	if err != nil {
		return err
	}
	defer c.Close()
	for _, p := range prefixes {
		for attempt := 0; ; attempt++ {
			_, err := c.Put(ctx, p+"/lockbench-ready", []byte("1"))
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("prefix %s not served: %w", p, err)
			}
			time.Sleep(200 * time.Millisecond)
			if err := c.RefreshDirectory(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
