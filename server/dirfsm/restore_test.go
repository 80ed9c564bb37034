package dirfsm

import (
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// A restore plan gives the cell new replicas (fresh ids, all marked
// restored) and raises each of its prefixes' epochs, and nothing else;
// bad plans are refused and change nothing.
func TestRestorePlan(t *testing.T) {
	a := bootstrapped(t, 8)
	if r := a.do(Command{Op: OpAssign, Assign: &api.AssignPrefixRequest{Prefix: "/other", Cell: "demo"}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := a.do(Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "side", Replicas: 3, On: []uint64{6, 7, 8}}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := a.do(Command{Op: OpAssign, Assign: &api.AssignPrefixRequest{Prefix: "/side", Cell: "side"}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	restore := func(r api.RestoreCellRequest) Result { return a.do(Command{Op: OpRestore, Restore: &r}) }
	before := a.s.Response()
	for _, bad := range []struct {
		req  api.RestoreCellRequest
		want api.Code
	}{
		{api.RestoreCellRequest{Cell: "nosuch", BackupIndex: 9}, api.CodeNotFound},
		{api.RestoreCellRequest{Cell: "demo"}, api.CodeBadRequest},
		{api.RestoreCellRequest{Cell: "demo", BackupIndex: 9, On: []uint64{1, 2}}, api.CodeBadRequest},
		{api.RestoreCellRequest{Cell: "demo", BackupIndex: 9, On: []uint64{1, 2, 2}}, api.CodeConflict},
		{api.RestoreCellRequest{Cell: "demo", BackupIndex: 9, On: []uint64{1, 2, 99}}, api.CodeNotFound},
	} {
		if got := codeOf(restore(bad.req)); got != bad.want {
			t.Errorf("restore %+v: code %q, want %q", bad.req, got, bad.want)
		}
	}
	if after := a.s.Response(); len(after.Cells) != len(before.Cells) || after.Cells[0].Replicas[0] != before.Cells[0].Replicas[0] || after.Prefixes[0] != before.Prefixes[0] {
		t.Fatal("a refused restore changed the directory")
	}

	r := restore(api.RestoreCellRequest{Cell: "demo", BackupIndex: 42, On: []uint64{6, 7, 8}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(r.Cell.Replicas) != 3 || r.Cell.RestoreIndex != 42 {
		t.Fatalf("restored cell %+v", r.Cell)
	}
	for i, rep := range r.Cell.Replicas {
		if rep.Lockd != uint64(6+i) || !rep.Restored || !rep.Initial || rep.ReplicaID <= 5 {
			t.Fatalf("replica %+v: want lockd %d, a fresh id, restored and initial", rep, 6+i)
		}
	}
	d, err := directory.New(a.s.Response())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		prefix string
		epoch  uint64
	}{{"/demo", 2}, {"/other", 2}, {"/side", 1}} {
		p, _ := d.PrefixFor(want.prefix)
		if p.Epoch != want.epoch {
			t.Errorf("%s at epoch %d after demo's restore, want %d", want.prefix, p.Epoch, want.epoch)
		}
	}
	plan, err := d.RestorePlan("demo")
	if err != nil {
		t.Fatal(err)
	}
	if plan.BackupIndex != 42 || len(plan.Replicas) != 3 || plan.Replicas[0].RaftAddr == "" || plan.Epochs["/demo"] != 2 || plan.Epochs["/other"] != 2 || len(plan.Epochs) != 2 {
		t.Fatalf("plan %+v", plan)
	}
	if plan.LeaderEpochFloor != api.LeaderEpochsPerRestore {
		t.Fatalf("the first plan's leader epoch floor %d, want %d", plan.LeaderEpochFloor, uint64(api.LeaderEpochsPerRestore))
	}
	if _, err := d.RestorePlan("side"); api.CodeOf(err) != api.CodeConflict {
		t.Fatalf("the plan of a cell never restored: %v", err)
	}

	// A second plan supersedes the first: new ids again, epoch up again,
	// placed by the rules when no lockds are named.
	r = restore(api.RestoreCellRequest{Cell: "demo", BackupIndex: 43})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(r.Cell.Replicas) != 3 || r.Cell.Replicas[0].ReplicaID <= plan.Replicas[2].ReplicaID {
		t.Fatalf("second plan %+v", r.Cell.Replicas)
	}
	if p := a.s.prefixes["/demo"]; p.Epoch != 3 {
		t.Fatalf("/demo at epoch %d after two restores, want 3", p.Epoch)
	}
	// Each restore's leader epochs start above the last one's.
	if d, err = directory.New(a.s.Response()); err != nil {
		t.Fatal(err)
	}
	if plan, err = d.RestorePlan("demo"); err != nil || plan.LeaderEpochFloor != 2*api.LeaderEpochsPerRestore {
		t.Fatalf("the second plan's leader epoch floor %d (%v), want %d", plan.LeaderEpochFloor, err, uint64(2*api.LeaderEpochsPerRestore))
	}

	// A cell with a migration in flight is not restored.
	if r := a.do(Command{Op: OpMigrate, Migrate: &api.MigrateRequest{Prefix: "/side", To: "demo", Action: api.MigrateBegin, Driver: "d1"}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := codeOf(restore(api.RestoreCellRequest{Cell: "side", BackupIndex: 5})); got != api.CodeConflict {
		t.Fatalf("restore during a migration: %q", got)
	}
}
