//go:build lockd_broken_earlyexpiry || lockd_broken_cache

package chaos

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The moves checkers on a real cell, each in the broken build of the
// service it exists for (run one at a time, with its tag):
//
//	go test -tags lockd_broken_earlyexpiry -run TestChaosBrokenMoves ./tests/chaos/
//	go test -tags lockd_broken_cache -run TestChaosBrokenMoves ./tests/chaos/
//
// lockd_broken_earlyexpiry: the leader expires sessions half their lease
// early; checker m3 (no client believes its session safe past its
// expiry) must fire on the expire-in-flight holder, which is first paused
// for half its lease.
// lockd_broken_cache: a change commits without invalidating its cachers;
// checker c' (cached reads of the moving prefix linearizable) must fire.
func TestChaosBrokenMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	kinds, check, tag := map[FaultKind]bool{ExpireInFlight: true}, "m3.", "lockd_broken_earlyexpiry"
	if brokenCacheBuild {
		kinds, check, tag = map[FaultKind]bool{MovePrefix: true, KillLeader: true}, "c'.", "lockd_broken_cache"
	}
	OnlyKinds = kinds
	defer func() { OnlyKinds = nil }()
	cfg := Config{Seed: 1, Short: true, Rounds: 2, Duration: time.Minute, LockdTags: tag, Logf: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s%s", rep.Summary(), rep.JSON())
	for _, c := range rep.Checks {
		if strings.HasPrefix(c.Name, check) {
			if len(c.Violations) == 0 {
				t.Errorf("checker %s found nothing in the %s build (%d checked)", c.Name, tag, c.Checked)
			}
			return
		}
	}
	t.Errorf("no checker %s in the report", check)
}
