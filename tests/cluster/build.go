package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
)

// buildTimeout bounds one go build.
const buildTimeout = 5 * time.Minute

// LockdPkg is the main package of lockd, relative to the module root.
const LockdPkg = "./server/cmd/lockd"

// built is one go build: done once per (package, flags) per test binary.
type built struct {
	once sync.Once
	bin  string
	err  error
}

var (
	buildMu   sync.Mutex
	buildDir  string // one temporary directory for every binary of the test binary
	buildRuns = map[string]*built{}
)

// Build returns the path of the main package pkg (relative to the module
// root, for example "./ctl/cmd/lockctl") built with the go build flags
// given, failing t if the build fails. Each (pkg, flags) is built once per
// test binary, into a temporary directory Cleanup removes.
func Build(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	bin, err := BuildBinary(pkg, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildBinary is Build for callers without a testing.TB (TestMain, the
// chaos command).
func BuildBinary(pkg string, flags ...string) (string, error) {
	key := pkg + "\x00" + strings.Join(flags, "\x00")
	buildMu.Lock()
	b, ok := buildRuns[key]
	if !ok {
		b = &built{}
		buildRuns[key] = b
	}
	n := len(buildRuns)
	buildMu.Unlock()
	b.once.Do(func() { b.bin, b.err = goBuild(pkg, flags, n) })
	return b.bin, b.err
}

func goBuild(pkg string, flags []string, n int) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	buildMu.Lock()
	if buildDir == "" {
		buildDir, err = os.MkdirTemp("", "testcluster-bin-")
	}
	dir := buildDir
	buildMu.Unlock()
	if err != nil {
		return "", err
	}
	// One subdirectory per build keeps the binary's own name (it shows in
	// ps and in logs) without clashes between flag sets.
	sub := filepath.Join(dir, fmt.Sprint(n))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(sub, filepath.Base(pkg))
	args := append(append([]string{"build", "-o", bin}, flags...), pkg)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// Binary returns the path of the lockd binary the clusters run:
// $TESTCLUSTER_LOCKD_BIN if set, else ./server/cmd/lockd built once per
// test binary (with -race if TESTCLUSTER_RACE=1, with -tags lockd_mutants if
// this test binary runs a mutant: MutantFlags).
func Binary() (string, error) {
	if err := checkMutantBuild(); err != nil {
		return "", err
	}
	if p := os.Getenv("TESTCLUSTER_LOCKD_BIN"); p != "" {
		return filepath.Abs(p)
	}
	flags := MutantFlags()
	if os.Getenv("TESTCLUSTER_RACE") == "1" {
		flags = append(flags, "-race")
	}
	return BuildBinary(LockdPkg, flags...)
}

// checkMutantBuild refuses a mutant selected in a test binary built
// without -tags lockd_mutants: the mutant would be silently off, and the
// tests pass as if it were caught by nothing.
func checkMutantBuild() error {
	if os.Getenv(mutant.Env) != "" && !mutant.Built {
		return fmt.Errorf("%s=%q but this test binary was built without -tags lockd_mutants: the mutant would be off (run make mutants, or go test -tags lockd_mutants)", mutant.Env, os.Getenv(mutant.Env))
	}
	return nil
}

// MutantFlags are the go build flags of the lockd and lockproxy binaries
// the harness builds: -tags lockd_mutants when this test binary (built with
// -tags lockd_mutants) has a mutant selected in LOCKD_MUTANT, which the
// processes it starts inherit (internal/mutant); none otherwise.
func MutantFlags() []string {
	if mutant.Any() {
		return []string{"-tags", "lockd_mutants"}
	}
	return nil
}

// ModuleRoot is the directory holding the go.mod of the current module, as
// `go env GOMOD` reports it from the working directory.
func ModuleRoot() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod), nil
}

// Cleanup removes the binaries Build built. Call it from TestMain after
// m.Run; processes still running keep working (the file is open) but no
// new one can start.
func Cleanup() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}
