package chaos

import (
	"testing"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
)

// TestChaosBrokenSemaphore: with mutant.PermitOffByOne the lockds grant a
// semaphore's permit with N permits ahead of it, so N+1 clients hold at
// once. Checker s (at most N live permit Contexts at any instant) must
// say so:
//
//	LOCKD_MUTANT=lockd_broken_permits go test -tags lockd_mutants -run '^TestChaosBrokenSemaphore$' ./tests/chaos/
func TestChaosBrokenSemaphore(t *testing.T) {
	needMutant(t, mutant.PermitOffByOne)
	by := runBrokenChaos(t, 20*time.Second)
	if by["semaphore"] == 0 {
		t.Errorf("checker s found nothing with the mutant on (violations by checker: %v)", by)
	}
}
