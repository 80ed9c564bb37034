package integration_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestProposalEndsWithItsLeadership: a write in flight on a leader that
// loses its majority ends a grace after the leader steps down
// (check-quorum): the leader answers unavailable, saying the leadership
// it was proposed under ended (its outcome unknown), rather than running
// out the write's deadline. (A move's copy page waited so a whole minute
// on a deposed leader, its prefix sealed.) One attempt straight to the
// leader per round; a round whose put arrived after the step-down
// (not_leader) proves nothing and is run again, within a bound.
func TestProposalEndsWithItsLeadership(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	cl := c.NewClient()
	defer cl.Close()
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	body, err := json.Marshal(api.PutRequest{Path: "/demo/inflight", Value: []byte("x")})
	must(t, err)
	const rounds = 5
	for round := 1; ; round++ {
		leader, err := c.WaitLeader("demo", 30*time.Second)
		must(t, err)
		paused := pauseThreeFollowers(t, c, leader)
		status, reply, err := cl.Once(ctx, c.APIAddr(leader), "POST", api.RoutePut, body, 30*time.Second)
		for _, id := range paused {
			must(t, c.Resume(id))
		}
		must(t, err)
		t.Logf("round %d: %d %s", round, status, reply)
		switch {
		case strings.Contains(string(reply), "lost the leadership"):
			return
		case strings.Contains(string(reply), string(api.CodeNotLeader)) && round < rounds:
			continue // it stepped down before the put arrived
		}
		t.Fatalf("a put in flight as its leader lost the majority: %d %s; want unavailable, the leadership lost", status, reply)
	}
}

// pauseThreeFollowers SIGSTOPs three of the five replicas other than
// leader, and waits until every thread of each has stopped: the leader
// keeps one follower, no majority. It returns the paused ids.
func pauseThreeFollowers(t *testing.T, c *cluster.Cluster, leader int) []int {
	t.Helper()
	var paused []int
	for _, id := range c.IDs() {
		if id != leader && len(paused) < 3 {
			must(t, c.Pause(id))
			paused = append(paused, id)
		}
	}
	for _, id := range paused {
		allStopped(t, c.PID(id))
	}
	return paused
}

// allStopped waits (bounded) until every thread of process pid is stopped
// (state T in /proc): SIGSTOP takes hold asynchronously, and a thread
// still running could acknowledge one more Raft message.
func allStopped(t *testing.T, pid int) {
	t.Helper()
	var running []string
	for attempt := 0; attempt < 500; attempt++ {
		running = running[:0]
		stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		must(t, err)
		for _, f := range stats {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread ended
			}
			// pid (comm) state ...: the state follows the last ')'.
			if i := strings.LastIndexByte(string(b), ')'); i < 0 || !strings.HasPrefix(string(b[i+1:]), " T") {
				running = append(running, f)
			}
		}
		if len(stats) > 0 && len(running) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d: threads not stopped after SIGSTOP: %v", pid, running)
}
