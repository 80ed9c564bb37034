package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// etcdctl binaries for the etcd gateway's tests (tests/integration
// etcdctl_test.go): two builds nobody here wrote, run unchanged against
// lockproxy --etcd-listen.

// EtcdctlDebianPath is Debian's etcdctl (package etcd-client, 3.4; .ci/run
// installs it).
const EtcdctlDebianPath = "/usr/bin/etcdctl"

// EtcdctlModuleVersion is the etcdctl built from its Go module: the
// version of go.etcd.io/etcd/client/v3 this module requires.
const EtcdctlModuleVersion = "v3.7.3"

// etcdctlModule is the main package of the module's etcdctl.
const etcdctlModule = "go.etcd.io/etcd/etcdctl/v3"

// etcdctlBuildTimeout bounds the one build of the module's etcdctl (a
// cold module cache downloads its dependencies: about 4 minutes here).
const etcdctlBuildTimeout = 10 * time.Minute

// etcdctlVersionTimeout bounds `etcdctl version`.
const etcdctlVersionTimeout = 20 * time.Second

// Etcdctl is one etcdctl binary.
type Etcdctl struct {
	Name    string // "debian-3.4", "module-v3.7.3": a subtest's name
	Path    string
	Version string // "3.4.23": what `etcdctl version` says
}

// EtcdctlDebian is Debian's etcdctl 3.4, or an error saying why not
// (not installed: apt-get install etcd-client).
func EtcdctlDebian() (Etcdctl, error) {
	if _, err := os.Stat(EtcdctlDebianPath); err != nil {
		return Etcdctl{}, fmt.Errorf("no Debian etcdctl at %s (apt-get install etcd-client): %w", EtcdctlDebianPath, err)
	}
	v, err := etcdctlVersion(EtcdctlDebianPath)
	if err != nil {
		return Etcdctl{}, err
	}
	if !strings.HasPrefix(v, "3.4.") {
		return Etcdctl{}, fmt.Errorf("%s is etcdctl %s, not Debian's 3.4", EtcdctlDebianPath, v)
	}
	return Etcdctl{Name: "debian-" + v, Path: EtcdctlDebianPath, Version: v}, nil
}

var moduleEtcdctl struct {
	once sync.Once
	e    Etcdctl
	err  error
}

// EtcdctlModule is etcdctl EtcdctlModuleVersion built from its module
// (through the Go module proxy) into $TMPDIR/lockd-etcdctl-<version>,
// once: later test binaries reuse it. It is built in a throwaway module of
// its own, so its dependencies never enter this module's go.mod.
func EtcdctlModule() (Etcdctl, error) {
	moduleEtcdctl.once.Do(func() { moduleEtcdctl.e, moduleEtcdctl.err = buildModuleEtcdctl() })
	return moduleEtcdctl.e, moduleEtcdctl.err
}

func buildModuleEtcdctl() (Etcdctl, error) {
	dir := filepath.Join(os.TempDir(), "lockd-etcdctl-"+EtcdctlModuleVersion)
	bin := filepath.Join(dir, "etcdctl")
	want := strings.TrimPrefix(EtcdctlModuleVersion, "v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Etcdctl{}, err
	}
	// Two test binaries may want it at once: one builds, the other waits.
	unlock, err := flockFile(filepath.Join(dir, "build.lock"))
	if err != nil {
		return Etcdctl{}, err
	}
	defer unlock()
	if v, err := etcdctlVersion(bin); err == nil && v == want {
		return Etcdctl{Name: "module-" + EtcdctlModuleVersion, Path: bin, Version: v}, nil
	}
	if err := goBuildEtcdctl(dir, bin); err != nil {
		return Etcdctl{}, err
	}
	v, err := etcdctlVersion(bin)
	if err != nil {
		return Etcdctl{}, err
	}
	if v != want {
		return Etcdctl{}, fmt.Errorf("built etcdctl says version %s, want %s", v, want)
	}
	return Etcdctl{Name: "module-" + EtcdctlModuleVersion, Path: bin, Version: v}, nil
}

// goBuildEtcdctl builds the module's etcdctl into bin, in a fresh module
// under dir requiring only it.
func goBuildEtcdctl(dir, bin string) error {
	mod, err := os.MkdirTemp(dir, "mod-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(mod)
	gomod := fmt.Sprintf("module lockdetcdctlbuild\n\ngo 1.24\n\nrequire %s %s\n", etcdctlModule, EtcdctlModuleVersion)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdctlBuildTimeout)
	defer cancel()
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=mod", "-o", tmp, etcdctlModule)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("build etcdctl %s from its module: %w\n%s", EtcdctlModuleVersion, err, out)
	}
	return os.Rename(tmp, bin)
}

// etcdctlVersion is the version `path version` prints ("3.4.23").
func etcdctlVersion(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdctlVersionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version")
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s version: %w: %s", path, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "etcdctl version: "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s version: no version in %q", path, out)
}

// flockFile takes an exclusive lock on path, released by the returned
// function.
func flockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, errors.Join(errors.New("lock "+path), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
