package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/tests/cluster"
)

// portBase is the first of 32 ports reserved for this test process, for
// lockbench's --port-base (a drawn port can meet another test's).
func portBase(t *testing.T) string {
	t.Helper()
	base, err := cluster.FreePortRun(32)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(base)
}

// TestRunAgainstLocalCluster builds lockd and lockbench and runs a short
// acquire against a real local cluster that lockbench starts itself.
func TestRunAgainstLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	for _, pkg := range []string{"../../../server/cmd/lockd", "../../../proxy/cmd/lockproxy", "."} {
		name := filepath.Base(pkg)
		if pkg == "." {
			name = "lockbench"
		}
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	html := filepath.Join(dir, "r.html")
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "lockbench"), "run", "acquire", "--start", "--port-base", portBase(t),
		"--duration", "1s", "--concurrency", "1,2", "-o", "json", "--html", html)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("lockbench: %v\n%s", err, stderr)
	}
	var r report.Run
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("output is not a run: %v\n%s", err, out)
	}
	// 1 and 2 workers on distinct locks, 2 on one lock.
	if len(r.Results) != 3 {
		t.Fatalf("%d results, want 3: %s", len(r.Results), out)
	}
	for _, res := range r.Results {
		if res.Summary.N == 0 || res.Summary.P99 <= 0 {
			t.Errorf("%s %s: %d ops, p99 %v ms", res.Scenario, res.Case, res.Summary.N, res.Summary.P99)
		}
	}
}

func TestLocalPrefixes(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "/demo"},
		{2, "/demo /payments"},
		{4, "/demo /payments /cell3 /cell4"},
	} {
		if got := fmt.Sprint(localPrefixes(tc.n)); got != "["+tc.want+"]" {
			t.Errorf("localPrefixes(%d) = %s, want [%s]", tc.n, got, tc.want)
		}
	}
}

func TestProfileFileName(t *testing.T) {
	for in, want := range map[string]string{
		"acquire 32 false":  "acquire-32-false.pprof",
		"writes 64 2":       "writes-64-2.pprof",
		"  Sessions 10000 ": "sessions-10000.pprof",
	} {
		if got := profileFileName(in); got != want {
			t.Errorf("profileFileName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScalingSteps(t *testing.T) {
	for n, want := range map[int][]int{1: {1}, 2: {1, 2}, 3: {1, 2, 3}, 4: {1, 2, 4}, 5: {1, 2, 4, 5}, 8: {1, 2, 4, 8}} {
		if got := scalingSteps(n); !slices.Equal(got, want) {
			t.Errorf("scalingSteps(%d) = %v, want %v", n, got, want)
		}
	}
}
