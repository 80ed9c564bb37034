package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// buildTimeout bounds the one go build of lockd.
const buildTimeout = 5 * time.Minute

var (
	buildOnce sync.Once
	buildBin  string
	buildDir  string
	buildErr  error
)

// Binary returns the path of the lockd binary, building ./server/cmd/lockd
// into a temporary directory on the first call of the test binary.
func Binary() (string, error) {
	buildOnce.Do(func() {
		if p := os.Getenv("TESTCLUSTER_LOCKD_BIN"); p != "" {
			buildBin, buildErr = filepath.Abs(p)
			return
		}
		buildBin, buildErr = build()
	})
	return buildBin, buildErr
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

func build() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "testcluster-lockd-")
	if err != nil {
		return "", err
	}
	buildDir = dir
	bin := filepath.Join(dir, "lockd")
	args := []string{"build", "-o", bin}
	if os.Getenv("TESTCLUSTER_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, "./server/cmd/lockd")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// Cleanup removes the binary Binary built. Call it from TestMain after
// m.Run; clusters still running keep working (the file is open) but no new
// process can start.
func Cleanup() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}
