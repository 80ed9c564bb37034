package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/lockservice/lockd/tests/cluster"
)

// runBrokenChaos builds pkg with -tags tag, runs the cluster on it (env
// names the harness's variable for that binary) for a short chaos run
// with the hostile tenant, and returns the violations by checker.
func runBrokenChaos(t *testing.T, env, pkg, tag string) map[string]int {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	bin, err := cluster.BuildBinary(pkg, "-tags", tag)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(env, bin)
	cfg := Config{Seed: 1, Short: true, Rounds: 1, Duration: 30 * time.Second, Logf: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s%s", rep.Summary(), rep.JSON())
	return violationsByChecker(rep)
}

// violationsByChecker counts a run's violations by the checker that found
// them.
func violationsByChecker(rep *Report) map[string]int {
	by := map[string]int{}
	for _, c := range rep.Checks {
		for _, v := range c.Violations {
			by[v.Checker]++
		}
	}
	return by
}

// hostileKinds are the attack kinds every run with the hostile tenant
// must have tried.
var hostileKinds = []string{
	"cred-none", "cred-empty", "cred-malformed", "cred-wrong", "cred-revoked",
	"reader-write", "reader-admin", "reader-outside-read", "reader-directory", "reader-make-parents",
	"random-path", "cache-block", "cache-missing", "watch-flood", "keepalive-made-up",
}

// checkHostileRan fails t if the hostile tenant did not try every kind.
func checkHostileRan(t *testing.T, rep *Report) {
	t.Helper()
	for _, k := range hostileKinds {
		if rep.Hostile[k].Attempts == 0 {
			t.Errorf("the hostile tenant never tried %s (counts %v)", k, rep.Hostile)
		}
	}
}

func TestMetricValue(t *testing.T) {
	b := []byte("# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_goroutines_other 7\nprocess_resident_memory_bytes 1.048576e+06\n")
	if got := metricValue(b, "go_goroutines"); got != 42 {
		t.Errorf("go_goroutines = %v", got)
	}
	if got := metricValue(b, "process_resident_memory_bytes"); got != 1<<20 {
		t.Errorf("rss = %v", got)
	}
	if got := metricValue(b, "absent"); got != 0 {
		t.Errorf("absent = %v", got)
	}
}
