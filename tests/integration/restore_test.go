package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestRestoreOntoOtherLockds is disaster recovery onto a new membership: a
// three-replica cell on lockds 4, 5 and 6 is backed up, takes more writes
// and a lock, and then loses all three lockds. lockctl restore plans it on
// lockds 1, 2 and 3; two lockds of the lost ones come back and drop their
// old replicas as soon as they read the plan; lockd restore imports the
// backup on each planned lockd (one from the plan file, two from the
// directory). The restored cell holds exactly the backup's state (every
// replica reports the backup's index and SHA-256), the writes after it are
// gone, and a token it grants compares above every token the lost cell
// issued, including the one granted after the backup.
func TestRestoreOntoOtherLockds(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	c, admin := manyCells(t, "--backup-dir", store)
	lockd, err := cluster.Binary()
	must(t, err)
	lockctl := cluster.Build(t, "./ctl/cmd/lockctl")
	ctl := func(args ...string) (string, error) {
		return runBounded(t, 2*time.Minute, lockctl, append([]string{"--endpoints", strings.Join(c.Endpoints(), ","), "--timeout", "60s"}, args...)...)
	}
	ctx, cancel := ctxFor(5 * time.Minute)
	defer cancel()
	_, err = admin.CreateCell(ctx, api.CreateCellRequest{Name: "dr", Replicas: 3, On: []uint64{4, 5, 6}})
	must(t, err)
	_, err = admin.AssignPrefix(ctx, "/dr", "dr")
	must(t, err)

	const n = 40
	for i := 0; i < n; i++ {
		_, err := admin.Put(ctx, fmt.Sprintf("/dr/k%02d", i), []byte(fmt.Sprint(i)), sdk.MakeParents())
		must(t, err)
	}
	_, err = admin.Put(ctx, "/dr/k00", []byte("v2")) // version 2
	must(t, err)
	big := bytes.Repeat([]byte("b"), 60<<10)
	_, err = admin.Put(ctx, "/dr/big", big)
	must(t, err)
	lock := func() uint64 {
		t.Helper()
		m := admin.NewMutex("/dr/lock")
		lctx, lcancel := context.WithTimeout(ctx, time.Minute)
		defer lcancel()
		must(t, m.Lock(lctx))
		tok := m.Token()
		must(t, m.Unlock(lctx))
		return tok
	}
	before := lock()
	b, err := admin.Backup(ctx, "dr")
	must(t, err)
	t.Logf("backup of dr at index %d: %d bytes, sha256 %s", b.Index, b.Bytes, b.SHA256)

	// After the backup: the log runs on, a lock is granted high in it, and
	// a write is made. All of it is lost with the cell.
	for i := 0; i < 60; i++ {
		_, err := admin.Put(ctx, "/dr/after", []byte(fmt.Sprint(i)))
		must(t, err)
	}
	lost := lock()
	t.Logf("tokens: %#x before the backup, %#x after it (lost)", before, lost)
	for _, id := range []int{4, 5, 6} {
		must(t, c.Kill(id))
	}

	// Refused, changing nothing.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"restore", "dr"}, "needs --index"},
		{[]string{"restore", "nosuch", "--index", "5"}, string(api.CodeNotFound)},
		{[]string{"restore", "dr", "--index", "5", "--on", "1,1,2"}, string(api.CodeConflict)},
	} {
		out, err := ctl(bad.args...)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("lockctl %v: %v %q; want %q", bad.args, err, out, bad.want)
		}
	}

	out, err := ctl("-o", "json", "restore", "dr", "--index", fmt.Sprint(b.Index), "--on", "1,2,3")
	if err != nil {
		t.Fatalf("lockctl restore: %v\n%s", err, out)
	}
	var plan api.RestorePlan
	must(t, json.Unmarshal([]byte(out), &plan))
	if plan.BackupIndex != b.Index || len(plan.Replicas) != 3 {
		t.Fatalf("plan %+v: want the backup at %d on three lockds", plan, b.Index)
	}
	if plan.Epochs["/dr"] != 2 {
		t.Errorf("plan %+v: want /dr at epoch 2", plan) // the token check below is the one that matters
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	must(t, os.WriteFile(planFile, []byte(out), 0o644))

	// Two of the lost lockds come back and drop their old replicas.
	for _, id := range []int{4, 5} {
		must(t, c.Restart(id))
	}
	for attempt := 0; ; attempt++ {
		if !hosts(c, 4, "dr") && !hosts(c, 5, "dr") {
			break
		}
		if attempt == 300 {
			t.Fatal("lockds 4 and 5 still run their old replicas of dr 30 s after the restore plan")
		}
		time.Sleep(100 * time.Millisecond)
	}

	restore := func(id int, extra ...string) (string, error) {
		args := append([]string{"restore", "--cell-name", "dr", "--from", store}, extra...)
		return runBounded(t, 2*time.Minute, lockd, append(args, c.ServeArgs(id)...)...)
	}
	for _, bad := range []struct {
		id   int
		args []string
		want string
	}{
		{6, []string{"--plan", planFile}, "places no replica on lockd 6"},
		{1, []string{"--plan", planFile, "--index", "7"}, fmt.Sprintf("restores the backup at index %d, not 7", b.Index)},
	} {
		out, err := restore(bad.id, bad.args...)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("lockd restore %v on lockd %d: %v %q; want %q", bad.args, bad.id, err, out, bad.want)
		}
	}
	for _, id := range []int{1, 2, 3} {
		must(t, c.Stop(id))
		var extra []string
		if id == 1 {
			extra = []string{"--plan", planFile} // the others read it from the directory
		}
		if out, err := restore(id, extra...); err != nil {
			t.Fatalf("lockd restore on lockd %d: %v\n%s", id, err, out)
		}
		must(t, c.Restart(id))
	}

	// The restored cell serves the backup's state.
	var got api.Node
	for attempt := 0; ; attempt++ {
		gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
		got, err = admin.Get(gctx, "/dr/k00")
		gcancel()
		if err == nil {
			break
		}
		if attempt == 30 {
			t.Fatalf("the restored cell does not serve: %v\n%s", err, c.LogTails(20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if string(got.Value) != "v2" || got.Version != 2 {
		t.Fatalf("k00 = %q version %d after the restore, want v2 version 2", got.Value, got.Version)
	}
	for i := 1; i < n; i++ {
		got, err := admin.Get(ctx, fmt.Sprintf("/dr/k%02d", i))
		must(t, err)
		if string(got.Value) != fmt.Sprint(i) || got.Version != 1 {
			t.Fatalf("k%02d = %q version %d after the restore", i, got.Value, got.Version)
		}
	}
	got, err = admin.Get(ctx, "/dr/big")
	must(t, err)
	if !bytes.Equal(got.Value, big) {
		t.Fatal("the 60 KB value did not survive the restore")
	}
	if _, err := admin.Get(ctx, "/dr/after"); api.CodeOf(err) != api.CodeNoNode {
		t.Fatalf("a write made after the backup: %v; want no_node", err)
	}
	for _, id := range []int{1, 2, 3} {
		st, ok := replicaOf(t, c, id, "dr")
		if !ok || st.RestoredIndex != b.Index || st.RestoredSHA256 != b.SHA256 {
			t.Fatalf("lockd %d's replica of dr: restored index %d sha256 %s; the backup is index %d sha256 %s", id, st.RestoredIndex, st.RestoredSHA256, b.Index, b.SHA256)
		}
	}
	after := lock()
	t.Logf("token after the restore: %#x", after)
	if after <= lost || after <= before {
		t.Fatalf("token %#x after the restore is not above %#x, granted by the lost cell after the backup", after, lost)
	}
	if api.TokenEpoch(after) != 2 {
		t.Fatalf("token %#x after the restore carries epoch %d, want 2", after, api.TokenEpoch(after))
	}
	for _, id := range []int{4, 5} {
		for attempt := 0; hosts(c, id, "dr"); attempt++ { // an unanswered status counts as hosting
			if attempt == 50 {
				t.Fatalf("lockd %d runs a replica of dr again", id)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// replicaOf is lockd id's replica of cell as it reports it.
func replicaOf(t *testing.T, c *cluster.Cluster, id int, cell string) (api.ReplicaStatus, bool) {
	t.Helper()
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	st, err := c.Status(ctx, id)
	must(t, err)
	for _, cs := range st.Cells {
		if cs.Cell == cell {
			return cs, true
		}
	}
	return api.ReplicaStatus{}, false
}

// hosts reports whether lockd id runs a replica of cell; a lockd that does
// not answer (just restarted) counts as still running it.
func hosts(c *cluster.Cluster, id int, cell string) bool {
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	st, err := c.Status(ctx, id)
	if err != nil {
		return true
	}
	for _, cs := range st.Cells {
		if cs.Cell == cell {
			return true
		}
	}
	return false
}
