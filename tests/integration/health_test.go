package integration_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/ctl"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestHealthMetrics: on three real lockds, every lockd's fsync probe
// reports (lockd_fsync_seconds), the leader of demo counts its three
// voters up, and after a follower is killed with kill -9 it counts two —
// a bare majority, what the LockdCellAtMinimumQuorum alert fires on.
func TestHealthMetrics(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{Replicas: 3})
	leader, err := c.WaitLeader("demo", 30*time.Second)
	must(t, err)
	up := func() (float64, float64) {
		addr := c.APIAddr(leader)
		return scrape(t, addr, "lockd_cell_voters_up", "demo"), scrape(t, addr, "lockd_cell_voters", "demo")
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for i := 0; !ok(); i++ {
			if i == 300 {
				u, v := up()
				t.Fatalf("%s: not within 30 s (voters up %v of %v)", what, u, v)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("three voters up", func() bool { u, v := up(); return u == 3 && v == 3 })
	for _, id := range c.IDs() {
		if n := scrape(t, c.APIAddr(id), "lockd_fsync_seconds_count", ""); n < 1 {
			t.Errorf("lockd %d has probed fsync %v times", id, n)
		}
	}
	follower := leader%3 + 1
	must(t, c.Kill(follower))
	waitFor("two voters up after a follower's kill", func() bool { u, v := up(); return u == 2 && v == 3 })
	// A follower has no series of its own: the leader's is the one to read.
	other := follower%3 + 1
	if other == leader {
		other = other%3 + 1
	}
	if n := scrape(t, c.APIAddr(other), "lockd_cell_voters", "demo"); n != 0 {
		t.Errorf("follower %d reports %v voters of demo", other, n)
	}
	// lockctl status puts it first, with the status page's reasons: demo
	// is at a bare majority (critical), its replica on the killed lockd
	// is down, and that lockd does not answer.
	var out strings.Builder
	for i := 0; ; i++ {
		out.Reset()
		err := ctl.Execute(context.Background(), []string{"--endpoints", c.APIAddr(leader), "--direct", "--timeout", "5s", "status"}, &out, io.Discard)
		first, _, _ := strings.Cut(out.String(), "\n")
		if err == nil && strings.HasPrefix(first, "HEALTH critical") && strings.Contains(out.String(), api.ReasonQuorumAtRisk) &&
			strings.Contains(out.String(), api.ReasonReplicaDown) && strings.Contains(out.String(), api.ReasonLockdDown) {
			break
		}
		if i == 50 {
			t.Fatalf("lockctl status after a follower's kill (%v):\n%s", err, out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Index(out.String(), api.ReasonQuorumAtRisk) > strings.Index(out.String(), "ENDPOINT") {
		t.Fatalf("the problems are not first:\n%s", out.String())
	}
}
