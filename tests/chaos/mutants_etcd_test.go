package chaos

import (
	"testing"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
)

// TestChaosBrokenEtcdLock: with mutant.EtcdLockEarly the etcd gateway's
// Lock service answers as soon as its lock node is made, before the node
// holds the lock. The etcd workload's Lock service holders
// (workload_etcd_lock.go) then hold at once: the real-time interval
// checker must say so (and the grant confirmation, which asks the
// gateway and the service who holds).
//
//	LOCKD_MUTANT=lockd_broken_etcd_lock_early go test -tags lockd_mutants -run TestChaosBrokenEtcdLock ./tests/chaos/
func TestChaosBrokenEtcdLock(t *testing.T) {
	needMutant(t, mutant.EtcdLockEarly)
	by := runBrokenChaos(t, 30*time.Second)
	for _, want := range []string{"intervals", "grant-confirmed"} {
		if by[want] == 0 {
			t.Errorf("checker %s found nothing with the mutant on (violations by checker: %v)", want, by)
		}
	}
}
