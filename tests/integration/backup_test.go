package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/backup"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestBackupAndRestore: lockctl backup makes the demo leader export a
// snapshot to the backup store; the cell then takes more writes, lockctl
// restore plans its rebuild on the same five lockds, and every lockd is
// stopped and restored from the backup with lockd restore (from the plan
// file: the directory is down with them). The
// restarted cell holds exactly the backup's state: every replica loaded the
// very bytes the backup saved (same index, same SHA-256), the values and
// versions written before it are there, the write after it is gone, and
// fencing tokens still rise. The other cell is untouched. A periodic backup
// runs too, and bad restores fail clearly and change nothing.
func TestBackupAndRestore(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	c := cluster.Start(t, cluster.Options{Lease: 5 * time.Second, ExtraArgs: []string{"--backup-dir", store, "--backup-every", "1s"}})
	cl := c.NewClient()
	lockd, err := cluster.Binary()
	must(t, err)
	lockctl := cluster.Build(t, "./ctl/cmd/lockctl")

	s := openSession(t, cl, "demo", 5*time.Second)
	s.keepAlive(time.Second)
	defer s.stop()
	const n = 40
	for i := 0; i < n; i++ {
		mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: s.header(), Path: fmt.Sprintf("/demo/dr/k%02d", i), Value: []byte(fmt.Sprint(i)), MakeParents: true}, nil)
	}
	big := bytes.Repeat([]byte("b"), 60<<10)
	mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: s.header(), Path: "/demo/dr/big", Value: big}, nil)
	mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: s.header(), Path: "/demo/dr/k00", Value: []byte("v2")}, nil) // version 2
	g1, err := s.acquire("/demo/dr/lock")
	must(t, err)
	must(t, s.release(&g1))
	mustDo(t, cl, api.RoutePut, api.PutRequest{Path: "/payments/dr/p", Value: []byte("before"), MakeParents: true}, nil)

	// The periodic backup (every second) has stored one by now.
	deadline := time.Now().Add(30 * time.Second)
	for {
		have, err := backup.Dir{Root: store}.List(context.Background(), "demo")
		must(t, err)
		if len(have) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no periodic backup of demo within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	out, err := exec.Command(lockctl, "--endpoints", strings.Join(c.Endpoints(), ","), "-o", "json", "backup", "demo").Output()
	if err != nil {
		t.Fatalf("lockctl backup: %v\n%s", err, out)
	}
	var b api.BackupResponse
	must(t, json.Unmarshal(out, &b))
	if b.Index == 0 || len(b.SHA256) != 64 || b.Bytes == 0 || !strings.HasPrefix(b.Location, store) {
		t.Fatalf("backup %+v", b)
	}
	t.Logf("backup of demo at index %d: %d bytes, sha256 %s", b.Index, b.Bytes, b.SHA256)

	// After the backup: gone once the cell is restored from it.
	mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: s.header(), Path: "/demo/dr/after", Value: []byte("lost")}, nil)
	mustDo(t, cl, api.RoutePut, api.PutRequest{Path: "/payments/dr/p", Value: []byte("after")}, nil)
	s.stop()

	// The plan: the same five lockds, new replicas. Every lockd stops its
	// old replica of demo as soon as it reads it.
	out, err = exec.Command(lockctl, "--endpoints", strings.Join(c.Endpoints(), ","), "-o", "json", "restore", "demo", "--index", fmt.Sprint(b.Index), "--on", "1,2,3,4,5").Output()
	if err != nil {
		t.Fatalf("lockctl restore: %v\n%s", err, out)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	must(t, os.WriteFile(planFile, out, 0o644))

	must(t, c.StopAll())
	restore := func(id int, extra ...string) ([]byte, error) {
		args := append([]string{"restore", "--cell-name", "demo", "--from", store, "--plan", planFile}, extra...)
		return exec.Command(lockd, append(args, c.ServeArgs(id)...)...).CombinedOutput()
	}
	// Bad restores fail clearly and change nothing.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--index", "1"}, fmt.Sprintf("the plan restores the backup at index %d, not 1", b.Index)},
		{[]string{"--cell-name", "nosuch"}, "the plan is for cell \"demo\", not \"nosuch\""},
	} {
		out, err := restore(1, bad.args...)
		if err == nil || !strings.Contains(string(out), bad.want) {
			t.Fatalf("restore %v: %v, %s; want an error saying %q", bad.args, err, out, bad.want)
		}
	}
	for _, id := range c.IDs() {
		out, err := restore(id)
		if err != nil {
			t.Fatalf("restore of replica %d: %v\n%s", id, err, out)
		}
	}
	must(t, c.StartAll())
	_, err = c.WaitLeader("demo", 30*time.Second)
	must(t, err)

	// Every replica loaded exactly the backup's bytes. A replica may start
	// its cell a moment after the leader is elected, and recover the
	// imported snapshot a moment after it lists the cell: wait for each.
	for _, id := range c.IDs() {
		for i := 0; ; i++ {
			if st, ok := replicaOf(t, c, id, "demo"); (ok && st.RestoredIndex != 0) || i == 300 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		st := cellStatus(t, c, id)
		if st.RestoredIndex != b.Index || st.RestoredSHA256 != b.SHA256 {
			t.Fatalf("replica %d restored index %d sha256 %s; the backup is index %d sha256 %s", id, st.RestoredIndex, st.RestoredSHA256, b.Index, b.SHA256)
		}
	}
	for i := 0; i < n; i++ {
		var got api.GetResponse
		mustDo(t, cl, api.RouteGet, api.ReadRequest{Path: fmt.Sprintf("/demo/dr/k%02d", i)}, &got)
		want, wantVersion := fmt.Sprint(i), uint64(1)
		if i == 0 {
			want, wantVersion = "v2", 2
		}
		if string(got.Node.Value) != want || got.Node.Version != wantVersion {
			t.Fatalf("k%02d = %q version %d after restore, want %q version %d", i, got.Node.Value, got.Node.Version, want, wantVersion)
		}
	}
	var got api.GetResponse
	mustDo(t, cl, api.RouteGet, api.ReadRequest{Path: "/demo/dr/big"}, &got)
	if !bytes.Equal(got.Node.Value, big) {
		t.Fatal("the 60 KB value did not survive the restore")
	}
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	if err := cl.Do(ctx, api.RouteGet, api.ReadRequest{Path: "/demo/dr/after"}, &got); err == nil {
		t.Fatal("a write made after the backup survived the restore")
	}
	// The other cell kept its own newer state.
	mustDo(t, cl, api.RouteGet, api.ReadRequest{Path: "/payments/dr/p"}, &got)
	if string(got.Node.Value) != "after" {
		t.Fatalf("payments changed by demo's restore: %q", got.Node.Value)
	}
	s2 := openSession(t, cl, "demo", 5*time.Second)
	s2.keepAlive(time.Second)
	defer s2.stop()
	g2, err := s2.acquire("/demo/dr/lock")
	must(t, err)
	if g2.token <= g1.token || api.TokenEpoch(g2.token) != 2 {
		t.Fatalf("token %#x after restore: want it above %#x from before the backup, at the plan's epoch 2", g2.token, g1.token)
	}
}
