package integration_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// globalTiming is the timing of a cell across regions (50–150 ms round
// trips): heartbeats every 500 ms, elections after 5–10 s, a 30 s lease
// renewed every 10 s, two minutes of grace.
const globalTiming = "heartbeat=500ms,election=5s,lease=30s,keepalive=10s,grace=2m"

// TestGlobalCellOverDelay runs a cell with its own timing on replicas
// whose Raft traffic goes through relays adding 50–100 ms each way: it
// commits, its clients take the cell's lease, KeepAlive interval and
// grace, and when its leader is killed it fails over with the session
// and the lock intact (no jeopardy, no expiry: no false expiry).
func TestGlobalCellOverDelay(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a slow cell")
	}
	c := cluster.Start(t, cluster.Options{
		RTTMillisecond: 100,
		Lease:          12 * time.Second,
		RaftDelay:      cluster.Delay{Min: 50 * time.Millisecond, Max: 100 * time.Millisecond},
		Cells:          []cluster.CellSpec{{Name: "demo", ShardID: 1, Prefixes: []string{"/demo"}, Timing: globalTiming}},
		StartTimeout:   2 * time.Minute,
		LeaderTimeout:  time.Minute,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints()})
	must(t, err)
	defer cl.Close()
	d := cl.Directory()
	want, err := api.ParseCellTiming(globalTiming)
	must(t, err)
	if len(d.Cells) != 1 || d.Cells[0].Timing == nil || *d.Cells[0].Timing != want {
		t.Fatalf("the directory's cell: %+v", d.Cells)
	}

	m := cl.NewMutex("/demo/global/lock")
	must(t, m.Lock(ctx))
	s, err := cl.Session(ctx, "demo")
	must(t, err)
	if s.Lease() != 30*time.Second || s.KeepAliveInterval() != 10*time.Second || s.Grace() != 2*time.Minute {
		t.Fatalf("session lease %v, keepalive %v, grace %v; want the cell's 30s, 10s, 2m", s.Lease(), s.KeepAliveInterval(), s.Grace())
	}
	var commits []time.Duration
	for i := range 20 {
		start := time.Now()
		_, err := cl.Put(ctx, "/demo/global/x", []byte{byte(i)})
		must(t, err)
		commits = append(commits, time.Since(start))
	}
	sort.Slice(commits, func(i, j int) bool { return commits[i] < commits[j] })
	t.Logf("put over 50–100 ms links: p50 %v, max %v", commits[len(commits)/2].Round(time.Millisecond), commits[len(commits)-1].Round(time.Millisecond))

	// Kill the leader: the cell elects another in 5–10 s plus the
	// relays' delay, well inside the 30 s lease.
	leader, killed := leaderKill(t, c)
	failover, err := measureFailover(c.NewClient(), killed, "/demo/global/after")
	must(t, err)
	t.Logf("fail-over after killing leader %d: %v to the first commit", leader, failover.Round(time.Millisecond))
	if _, err := cl.Put(ctx, "/demo/global/x", []byte("after")); err != nil {
		t.Fatal(err)
	}
	// The session rode through: no jeopardy, no expiry, lock still held.
	for {
		select {
		case ev := <-s.Events():
			if ev.Type == sdk.SessionJeopardy || ev.Type == sdk.SessionExpired {
				t.Fatalf("session event %s across the fail-over: a false expiry", ev.Type)
			}
			continue
		default:
		}
		break
	}
	if m.Context().Err() != nil {
		t.Fatal("the lock's context ended across the fail-over")
	}
	if r, err := cl.CheckToken(ctx, "/demo/global/lock", m.Token()); err != nil || !r.Valid {
		t.Fatalf("the holder's token after the fail-over: %+v %v", r, err)
	}
	must(t, m.Unlock(ctx))

	// Restarted, the killed replica runs the cell's timing again (from its
	// own record, before it reads the directory).
	must(t, c.Restart(leader))
	st, err := c.Status(ctx, leader)
	must(t, err)
	for _, r := range st.Cells {
		if r.Cell == "demo" && (r.Timing == nil || *r.Timing != want) {
			t.Fatalf("restarted replica %d runs demo on timing %+v, want %+v", leader, r.Timing, want)
		}
	}
}
