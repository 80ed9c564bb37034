//go:build lockproxy_broken_lendtoken

package chaos

import (
	"testing"

	"github.com/lockservice/lockd/tests/cluster"
)

const brokenLendTokenBuild = true

// TestChaosBrokenLendToken runs only in the broken build (go test -tags
// lockproxy_broken_lendtoken ./tests/chaos/): its lockproxies lend their
// own admin token to a client's request that carries no Authorization
// header (issue 22, hole 1). The hostile tenant's requests with no
// credentials through a proxy then pass as the admin's, and checkers h1
// (nothing outside its grants answered) and h2 (nothing changed) must say
// so.
func TestChaosBrokenLendToken(t *testing.T) {
	by := runBrokenChaos(t, "TESTCLUSTER_PROXY_BIN", cluster.ProxyPkg, "lockproxy_broken_lendtoken")
	for _, want := range []string{"hostile-refused", "hostile-state"} {
		if by[want] == 0 {
			t.Errorf("checker %s found nothing in the broken build (violations by checker: %v)", want, by)
		}
	}
}
