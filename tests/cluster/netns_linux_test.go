//go:build linux

package cluster

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// TestNetnsPartition runs a 5-replica cluster with every replica in its own
// network namespace: the harness's PID is lockd's own (ip netns exec
// execs), isolating the leader gets the majority a new leader while the old
// one cannot commit, healing brings the old leader back as a follower, and
// Close leaves no namespace or link behind.
func TestNetnsPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if err := NetnsAvailable(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	nn, err := NewNetns(5, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nn.Close(); err != nil {
			t.Errorf("netns close: %v", err)
		}
		links, _ := linkNames()
		for _, l := range links {
			if m := reBridge.FindStringSubmatch(l); m != nil && m[1] == strconv.Itoa(nn.subnet) {
				t.Errorf("bridge %s left behind", l)
			}
			if m := reHostV.FindStringSubmatch(l); m != nil && m[1] == strconv.Itoa(nn.subnet) {
				t.Errorf("veth %s left behind", l)
			}
		}
		out, _ := runIP("netns", "list")
		if strings.Contains(out, nn.Namespace(1)) {
			t.Errorf("namespace %s left behind", nn.Namespace(1))
		}
	})
	c := Start(t, Options{Network: nn, Cells: DefaultCells[:1]})
	for _, id := range c.IDs() {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(c.PID(id)) + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "lockd" {
			t.Fatalf("pid %d of replica %d is %q (%v), want lockd", c.PID(id), id, comm, err)
		}
		if !strings.HasPrefix(c.APIAddr(id), nn.Host(id)+":") {
			t.Fatalf("replica %d api %s not on %s", id, c.APIAddr(id), nn.Host(id))
		}
	}
	cl := c.NewClient()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.Do(ctx, api.RoutePut, api.PutRequest{Path: "/demo/k", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	old, err := c.LeaderOf("demo")
	if err != nil {
		t.Fatal(err)
	}
	if err := nn.Isolate(old); err != nil {
		t.Fatal(err)
	}
	if n := len(nn.Cuts()); n != 8 {
		t.Fatalf("%d directed cuts, want 8", n)
	}
	// The isolated leader cannot commit.
	short, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	_, b, err := cl.Once(short, c.APIAddr(old), "POST", api.RoutePut, []byte(`{"path":"/demo/k","value":"Mg=="}`), 2*time.Second)
	cancel2()
	if err == nil && !strings.Contains(string(b), "error") {
		t.Fatalf("isolated leader %d acknowledged a write: %s", old, b)
	}
	var next int
	for i := 0; i < 500; i++ {
		if next, err = c.WaitLeader("demo", 10*time.Second); err == nil && next != old {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if next == old || next == 0 {
		t.Fatalf("no new leader besides isolated %d: %v", old, err)
	}
	if err := nn.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(ctx, api.RoutePut, api.PutRequest{Path: "/demo/k", Value: []byte("3")}, nil); err != nil {
		t.Fatal(err)
	}
	// The healed ex-leader catches up.
	for i := 0; ; i++ {
		st, err := c.Status(ctx, old)
		if err == nil && len(st.Cells) == 1 && st.Cells[0].Role == "follower" && st.Cells[0].LeaderID == uint64(next) {
			break
		}
		if i > 500 {
			t.Fatalf("healed replica %d: %+v %v", old, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Close()
}

// TestSweepNetns: leftovers of a dead owner (a namespace, a bridge and a
// veth with NetnsPrefix names) are removed; those of a live owner stay.
func TestSweepNetns(t *testing.T) {
	if err := NetnsAvailable(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	const dead = "9999999" // above any pid_max (at most 4194304)
	live := strconv.Itoa(os.Getpid())
	// Subnet 253 is never allocated (NewNetns uses 1..250).
	made := []struct{ kind, name string }{
		{"netns", NetnsPrefix + "253-" + dead + "-r1"},
		{"netns", NetnsPrefix + "253-" + live + "-r2"},
		{"link", NetnsPrefix + "253b" + dead},
		{"veth", NetnsPrefix + "253h1"},
	}
	t.Cleanup(func() {
		for _, m := range made {
			if m.kind == "netns" {
				_, _ = runIP("netns", "del", m.name)
			} else if linkExists(m.name) {
				_, _ = runIP("link", "del", m.name)
			}
		}
	})
	for _, m := range made {
		var err error
		switch m.kind {
		case "netns":
			_, err = runIP("netns", "add", m.name)
		case "link":
			_, err = runIP("link", "add", m.name, "type", "bridge")
		case "veth":
			_, err = runIP("link", "add", m.name, "type", "veth", "peer", "name", NetnsPrefix+"253n1")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	SweepNetns(t.Logf)
	out, _ := runIP("netns", "list")
	if strings.Contains(out, made[0].name) {
		t.Errorf("dead owner's namespace %s not swept", made[0].name)
	}
	if !strings.Contains(out, made[1].name) {
		t.Errorf("live owner's namespace %s swept", made[1].name)
	}
	if linkExists(made[2].name) || linkExists(made[3].name) {
		t.Errorf("dead owner's links not swept")
	}
}
