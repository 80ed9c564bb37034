package chaos

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/tests/cluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Cleanup()
	os.Exit(code)
}

// TestChaosShort is the fixed-seed run of `make test`: one round of every
// nemesis (test timing: 20 ms Raft ticks, 5 s lease) against a real
// five-replica cell in network namespaces, every workload, every checker.
// It must find no violation, inject every fault, and measure fail-overs
// and takeovers. Under -race the clients are fewer and slower; lockd is
// built without -race either way.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	if mutant.Any() {
		t.Skip("a mutant is on (LOCKD_MUTANT): its checkers must fire, in TestChaosBroken… (mutants_test.go)")
	}
	// One round ends the fault phase; Duration only bounds it, for a
	// machine slow enough (the whole suite running beside it) that the
	// round takes longer than usual: 3 minutes cut it short once.
	cfg := Config{Seed: 1, Short: true, Rounds: 1, Duration: 4*time.Minute + 30*time.Second, Logf: t.Logf}
	if raceEnabled {
		cfg.Locks, cfg.WorkersPerLock, cfg.SharedReaders, cfg.Candidates = 1, 3, 2, 2
		cfg.ConfigClients, cfg.Churners, cfg.AckedWriters = 2, 1, 1
		cfg.Think, cfg.ObservePeriod = 100*time.Millisecond, 50*time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	t0 := time.Now()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wall time %v\n%s%s", time.Since(t0).Round(time.Second), rep.Summary(), rep.JSON())
	if rep.Violations != 0 {
		if rep.SessionsLost != 0 {
			logLeaseHistory(t, rep.Dir)
		}
		t.Fatalf("%d violations (data and logs in %s)", rep.Violations, rep.Dir)
	}
	// Without namespaces Run fails unless CHAOS_NO_PARTITIONS=1 said to
	// skip the partition nemeses.
	skipPartitions := os.Getenv("CHAOS_NO_PARTITIONS") == "1"
	for _, k := range roundBag {
		if partitionKinds[k] && skipPartitions {
			continue
		}
		n := rep.Faults[string(k)] + rep.Faults[string(k)+" (past the lease)"]
		if n == 0 {
			t.Errorf("fault %s was not injected", k)
		}
	}
	if rep.Failovers < 2 || rep.TakeoverMS.N < 3 {
		t.Errorf("%d fail-overs and %d takeovers measured, want ≥2 and 3", rep.Failovers, rep.TakeoverMS.N)
	}
	if rep.SessionsLost != 0 {
		t.Errorf("%d sessions lost", rep.SessionsLost)
	}
	checkHostileRan(t, rep)
	if rep.Ops < 1000 {
		t.Errorf("only %d operations", rep.Ops)
	}
	if rep.Intervals < 50 || rep.Deletions < 50 {
		t.Errorf("%d hold intervals and %d deletion indices recorded, want ≥50 each", rep.Intervals, rep.Deletions)
	}
}

// maxLeaseHistory bounds the replica log lines logLeaseHistory prints.
const maxLeaseHistory = 300

// logLeaseHistory prints the replicas' log lines about their session
// managers (each leadership's start and stop) and session expiries, so a
// lost session's failure in CI, whose data directory is gone, can be read
// against the leaderships around it.
func logLeaseHistory(t *testing.T, dir string) {
	paths, _ := filepath.Glob(filepath.Join(dir, "replica-*.log"))
	n := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() && n < maxLeaseHistory {
			if l := sc.Text(); strings.Contains(l, "session manager") || strings.Contains(l, "session expired") {
				t.Logf("%s: %s", filepath.Base(p), l)
				n++
			}
		}
		_ = f.Close()
	}
}
