package docs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockservice/lockd/ctl"
	"github.com/lockservice/lockd/tests/cluster"
)

const (
	// DevReadyTimeout bounds the wait for lockd dev's "ready:" line.
	DevReadyTimeout = 2 * time.Minute
	// DevStopTimeout bounds lockd dev's exit after SIGINT (then SIGKILL;
	// its lockds and proxies die with it).
	DevStopTimeout = 30 * time.Second
	// devLockds and devProxies are lockd dev's defaults (--lockds,
	// --proxies), which `make run` and the docs use.
	devLockds, devProxies = 6, 2
)

// Dev is one `bin/lockd dev` the docs run against, in its working
// directory, with its data in ./.lockd-dev there (as `make run`).
type Dev struct {
	Name  string
	Dir   string
	Ports Ports
	cmd   *exec.Cmd
	log   syncBuffer
	done  chan struct{}
	err   error // its exit, once done is closed
}

// AllocPorts reserves a dev cluster's ports for this test process (never
// the defaults a developer's `make run` holds, nor another test's).
func AllocPorts(etcd bool) (Ports, error) {
	p := Ports{Lockds: devLockds, Proxies: devProxies}
	var err error
	if p.API, err = cluster.FreePortRun(devLockds); err != nil {
		return p, err
	}
	if p.Raft, err = cluster.FreePortRun(devLockds); err != nil {
		return p, err
	}
	if p.Proxy, err = cluster.FreePortRun(devProxies); err != nil {
		return p, err
	}
	if etcd {
		p.Etcd, err = cluster.FreePortsApart(devProxies, etcdPortStride)
	}
	return p, err
}

// StartDev starts dir/bin/lockd dev on p's ports (with the etcd gateway if
// p has an etcd port; requiring tokens if auth).
func StartDev(name, dir string, p Ports, auth bool) (*Dev, error) {
	itoa := strconv.Itoa
	args := []string{"dev", "--data-dir", "./.lockd-dev", "--lockds", itoa(p.Lockds), "--proxies", itoa(p.Proxies),
		"--api-port", itoa(p.API), "--raft-port", itoa(p.Raft), "--proxy-port", itoa(p.Proxy)}
	if p.Etcd != 0 {
		args = append(args, "--etcd", "--etcd-port", itoa(p.Etcd))
	}
	if auth {
		args = append(args, "--auth")
	}
	d := &Dev{Name: name, Dir: dir, Ports: p, done: make(chan struct{})}
	d.cmd = exec.Command(filepath.Join(dir, "bin", "lockd"), args...)
	d.cmd.Dir, d.cmd.Stdout, d.cmd.Stderr = dir, &d.log, &d.log
	if err := cluster.StartProcess(d.cmd); err != nil {
		return nil, err
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

// WaitReady waits, within DevReadyTimeout, for the "ready:" line.
func (d *Dev) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, DevReadyTimeout)
	defer cancel()
	for {
		log := d.log.String()
		if strings.HasPrefix(log, "ready:") || strings.Contains(log, "\nready:") {
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("%s exited before it was ready (%v):\n%s", d.Name, d.err, tail(log))
		case <-ctx.Done():
			return fmt.Errorf("%s: no ready line within %v:\n%s", d.Name, DevReadyTimeout, tail(log))
		case <-time.After(pollEvery):
		}
	}
}

// Stop stops the cluster as Ctrl-C does (SIGINT to its PID), or kills it
// after DevStopTimeout.
func (d *Dev) Stop() error {
	select {
	case <-d.done:
		return d.err
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
		return d.err
	case <-time.After(DevStopTimeout):
		_ = d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("%s did not stop within %v of SIGINT (killed)", d.Name, DevStopTimeout)
	}
}

// Log is what the cluster printed.
func (d *Dev) Log() string { return d.log.String() }

// Env is where blocks run on this cluster: its directory, bin/ on PATH,
// lockctl's default endpoints moved to its ports (etcdctl refuses
// ETCDCTL_ENDPOINTS beside --endpoints: docs name its endpoints, see
// defaultAddressed).
func (d *Dev) Env() *Env {
	m := d.Ports.Map()
	vars := append(baseEnv(),
		"PATH="+filepath.Join(d.Dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		ctl.EnvEndpoints+"="+Rewrite(ctl.DefaultEndpoints, m))
	return &Env{Name: d.Name, Dir: d.Dir, Vars: vars, Ports: m}
}

// baseEnv is the test's environment without PATH and without what would
// point the docs' commands elsewhere (LOCKCTL_*, ETCDCTL_*).
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == dirEnv || strings.HasPrefix(k, "LOCKCTL_") || strings.HasPrefix(k, "ETCDCTL_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
