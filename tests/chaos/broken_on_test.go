//go:build lockd_broken_grant_early

package chaos

import (
	"context"
	"testing"
	"time"
)

const brokenGrantBuild = true

// TestChaosBrokenGrant runs only in the broken build (go test -tags
// lockd_broken_grant_early): the SDK's Lock reports a grant as soon as its
// node is created, before its predecessor is gone. The checkers that exist
// for that bug must fire on a real cell: the real-time intervals overlap,
// the service does not confirm the grants, and the fence refuses an old
// holder that still believes it holds. (`make test` builds without the tag
// and runs TestChaosShort, which must find nothing.)
func TestChaosBrokenGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cfg := Config{Seed: 1, Short: true, Rounds: 1, Duration: 20 * time.Second, Logf: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s%s", rep.Summary(), rep.JSON())
	by := violationsByChecker(rep)
	for _, want := range []string{"intervals", "grant-confirmed", "fencing"} {
		if by[want] == 0 {
			t.Errorf("checker %s found nothing in the broken build (violations by checker: %v)", want, by)
		}
	}
}
