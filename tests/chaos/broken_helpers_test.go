//go:build lockproxy_broken_lendtoken || lockd_broken_cachewindow || lockd_broken_grant_early

package chaos

// Helpers of the tests that run only in a deliberately broken build.

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
