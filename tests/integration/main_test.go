// Package integration_test runs real five-replica lockd clusters (separate
// processes on loopback, dragonboat's LogDB with fsync) and checks the
// service's promises end to end over the HTTP API: mutual exclusion, lease
// expiry, fencing tokens across fail-overs and restarts, sessions and
// acknowledged writes surviving a leader kill, bad input refused without
// effect, and leader hints.
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
