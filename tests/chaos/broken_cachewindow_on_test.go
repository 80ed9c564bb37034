//go:build lockd_broken_cachewindow

package chaos

import (
	"testing"

	"github.com/lockservice/lockd/tests/cluster"
)

const brokenCacheWindowBuild = true

// TestChaosBrokenCacheWindow runs only in the broken build (go test -tags
// lockd_broken_cachewindow ./tests/chaos/): its lockds let a write wait
// for a cacher that renews its lease but never acknowledges, for as long
// as it renews (issue 22, hole 5). The hostile tenant's cache-block phases
// then hold the workloads' writes, and checker h3 must say so.
func TestChaosBrokenCacheWindow(t *testing.T) {
	by := runBrokenChaos(t, "TESTCLUSTER_LOCKD_BIN", cluster.LockdPkg, "lockd_broken_cachewindow")
	if by["write-stall"] == 0 {
		t.Errorf("checker h3 found nothing in the broken build (violations by checker: %v)", by)
	}
}
