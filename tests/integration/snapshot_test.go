package integration_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestSnapshotCatchUpAndRestart runs the cell with a snapshot every 20
// entries, so the log is compacted far behind a follower that is down: it
// must catch up from a streamed snapshot of the state machine. Then the
// whole cluster restarts from snapshots plus log, and every write, session
// and ephemeral node is still there, with tokens still increasing.
func TestSnapshotCatchUpAndRestart(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{Lease: 5 * time.Second, ExtraArgs: []string{"--snapshot-entries", "20"}})
	cl := c.NewClient()
	leader, err := c.LeaderOf("demo")
	must(t, err)
	follower := 1
	if follower == leader {
		follower = 2
	}
	must(t, c.Stop(follower))

	s := openSession(t, cl, "demo", 5*time.Second)
	s.keepAlive(time.Second)
	defer s.stop()
	var eph api.CreateResponse
	mustDo(t, cl, api.RouteCreate, api.CreateRequest{WriteHeader: s.header(), Path: "/demo/snap/eph", Ephemeral: true, MakeParents: true}, &eph)
	g1, err := s.acquire("/demo/snap/lock")
	must(t, err)
	must(t, s.release(&g1))
	const writes = 200
	for i := 0; i < writes; i++ {
		mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: s.header(), Path: fmt.Sprintf("/demo/snap/k%03d", i), Value: []byte(fmt.Sprint(i))}, nil)
	}
	// ~3 MB of values: the snapshot spans more than one of dragonboat's
	// 2 MiB snapshot blocks (restores of such snapshots once failed).
	big := bytes.Repeat([]byte("b"), 60<<10)
	for i := 0; i < 50; i++ {
		mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: s.header(), Path: fmt.Sprintf("/demo/snap/big%02d", i), Value: big}, nil)
	}

	// The follower comes back behind a compacted log: it needs a snapshot.
	must(t, c.Restart(follower))
	leaderIndex := appliedIndex(t, c, leader)
	deadline := time.Now().Add(30 * time.Second)
	for appliedIndex(t, c, follower) < leaderIndex {
		if time.Now().After(deadline) {
			t.Fatalf("follower %d stuck at %d, leader at %d", follower, appliedIndex(t, c, follower), leaderIndex)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := countSnapshots(t, c.Dir()); n == 0 {
		t.Fatal("no snapshot directories on disk")
	}
	fs, ls := cellStatus(t, c, follower), cellStatus(t, c, leader)
	if fs.Nodes != ls.Nodes || fs.Sessions != ls.Sessions {
		t.Fatalf("follower has %d nodes, %d sessions; leader %d, %d", fs.Nodes, fs.Sessions, ls.Nodes, ls.Sessions)
	}

	// Restart everything: state comes back from snapshot plus log replay.
	must(t, c.StopAll())
	must(t, c.StartAll())
	_, err = c.WaitLeader("demo", 30*time.Second)
	must(t, err)
	for i := 0; i < writes; i++ {
		var got api.GetResponse
		mustDo(t, cl, api.RouteGet, api.ReadRequest{Path: fmt.Sprintf("/demo/snap/k%03d", i)}, &got)
		if string(got.Node.Value) != fmt.Sprint(i) {
			t.Fatalf("k%03d = %q after restart", i, got.Node.Value)
		}
	}
	var got api.GetResponse
	mustDo(t, cl, api.RouteGet, api.ReadRequest{Path: "/demo/snap/big49"}, &got)
	if !bytes.Equal(got.Node.Value, big) {
		t.Fatal("big value lost across the restart")
	}
	mustDo(t, cl, api.RouteGet, api.ReadRequest{Path: "/demo/snap/eph"}, &got)
	if got.Node.Owner != s.id {
		t.Fatalf("ephemeral owner %d after restart, want session %d", got.Node.Owner, s.id)
	}
	g2, err := s.acquire("/demo/snap/lock")
	must(t, err)
	if g2.token <= g1.token {
		t.Fatalf("token %d after restart, not above %d", g2.token, g1.token)
	}
	t.Logf("follower caught up to index %d from a snapshot; %d snapshot dirs on disk", leaderIndex, countSnapshots(t, c.Dir()))
}

func cellStatus(t *testing.T, c *cluster.Cluster, id int) api.ReplicaStatus {
	t.Helper()
	st, ok := replicaOf(t, c, id, "demo")
	if !ok {
		t.Fatalf("replica %d reports no demo cell", id)
	}
	return st
}

func appliedIndex(t *testing.T, c *cluster.Cluster, id int) uint64 {
	return cellStatus(t, c, id).AppliedIndex
}

func countSnapshots(t *testing.T, dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), "snapshot-") {
			n++
		}
		return nil
	})
	return n
}
