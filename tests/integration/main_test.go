// Package integration_test runs real five-replica lockd clusters (separate
// processes on loopback, dragonboat's LogDB with fsync) and checks the
// service's promises end to end over the HTTP API: mutual exclusion, lease
// expiry, fencing tokens across fail-overs and restarts, sessions and
// acknowledged writes surviving a leader kill, bad input refused without
// effect, and leader hints.
//
// Every test starts its own cluster and most run in parallel (t.Parallel;
// make test runs up to -parallel 3 at once: clusters mostly wait on timers
// and disks, so three share two cores). The few that assert timeliness (a
// wake-up by event, jeopardy before expiry, KeepAlive counts, a kill
// between two steps of lockctl) are not parallel and say why: Go runs them
// first, one at a time.
package integration_test

import (
	"os"
	"testing"

	"github.com/lockservice/lockd/tests/cluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopBenchCluster()
	cluster.Cleanup()
	os.Exit(code)
}
