package dirfsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// applier applies commands to a state at growing indices.
type applier struct {
	t     *testing.T
	s     *State
	index uint64
}

func (a *applier) do(c Command) Result {
	a.t.Helper()
	a.index++
	var r Result
	if err := json.Unmarshal(a.s.Apply(a.index, c.Encode()), &r); err != nil {
		a.t.Fatal(err)
	}
	return r
}

func lockds(n int, zones ...string) []api.LockdInfo {
	var out []api.LockdInfo
	for i := 1; i <= n; i++ {
		l := api.LockdInfo{ID: uint64(i), RaftAddr: fmt.Sprintf("127.0.0.1:%d", 7100+i), APIAddr: fmt.Sprintf("127.0.0.1:%d", 7000+i)}
		if len(zones) > 0 {
			l.Zone = zones[(i-1)%len(zones)]
		}
		out = append(out, l)
	}
	return out
}

func bootstrapped(t *testing.T, n int, zones ...string) *applier {
	a := &applier{t: t, s: NewState()}
	r := a.do(Command{Op: OpBootstrap, Bootstrap: &Bootstrap{
		Lockds: lockds(n, zones...), DirectoryLockds: []uint64{1, 2, 3, 4, 5},
		Cells: []BootCell{{Name: "demo", ShardID: 1, Prefixes: []string{"/demo"}, Lockds: []uint64{1, 2, 3, 4, 5}}},
	}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return a
}

func TestBootstrapOnlyOnce(t *testing.T) {
	a := bootstrapped(t, 6)
	r := a.do(Command{Op: OpBootstrap, Bootstrap: &Bootstrap{Lockds: lockds(5), Cells: []BootCell{{Name: "other", ShardID: 9, Prefixes: []string{"/x"}, Lockds: []uint64{1}}}}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	d := a.s.Response()
	if len(d.Cells) != 1 || d.Cells[0].Name != "demo" || len(d.Lockds) != 6 {
		t.Fatalf("a second bootstrap changed the directory: %+v", d)
	}
	if _, err := directory.New(d); err != nil {
		t.Fatalf("served directory invalid: %v", err)
	}
}

func TestCreateCellWithTiming(t *testing.T) {
	a := bootstrapped(t, 5)
	want := api.CellTiming{HeartbeatMS: 500, ElectionMS: 5000, LeaseMS: 30000, KeepAliveMS: 10000, GraceMS: 120000}
	r := a.do(Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "global", Timing: &want}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Cell.Timing == nil || *r.Cell.Timing != want {
		t.Fatalf("created with timing %+v", r.Cell.Timing)
	}
	for _, c := range a.s.Response().Cells {
		if c.Name == "global" && (c.Timing == nil || *c.Timing != want) {
			t.Fatalf("the directory lists %s with timing %+v", c.Name, c.Timing)
		}
		if c.Name == "demo" && c.Timing != nil {
			t.Fatalf("demo has timing %+v", c.Timing)
		}
	}
}

func TestCreateCellPlacement(t *testing.T) {
	a := bootstrapped(t, 7, "a", "b", "c")
	r := a.do(Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "payments"}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	zones := map[string]int{}
	seen := map[uint64]bool{}
	for _, rep := range r.Cell.Replicas {
		if seen[rep.Lockd] {
			t.Fatalf("two replicas on lockd %d", rep.Lockd)
		}
		seen[rep.Lockd] = true
		zones[rep.Zone]++
	}
	if len(r.Cell.Replicas) != 5 || len(zones) != 3 {
		t.Fatalf("placement %+v over zones %v: want 5 replicas over 3 zones", r.Cell.Replicas, zones)
	}
	// Lockds 6 and 7 host nothing yet: the least loaded go first.
	if !seen[6] || !seen[7] {
		t.Errorf("placement %v skipped the empty lockds 6 and 7", r.Cell.Replicas)
	}
	if r.Cell.ShardID != 2 {
		t.Errorf("shard id %d, want 2 (after the bootstrap's 1)", r.Cell.ShardID)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	cases := []struct {
		name string
		cmd  Command
		code api.Code
	}{
		{"cell exists", Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "demo"}}, api.CodeConflict},
		{"bad cell name", Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "Bad Name"}}, api.CodeBadRequest},
		{"four replicas", Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "x", Replicas: 4}}, api.CodeBadRequest},
		{"a lease shorter than its elections", Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "x", Timing: &api.CellTiming{ElectionMS: 5000, LeaseMS: 12000}}}, api.CodeBadRequest},
		{"two replicas on one process", Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "x", On: []uint64{1, 2, 2}}}, api.CodeConflict},
		{"unknown lockd", Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "x", On: []uint64{1, 2, 9}}}, api.CodeNotFound},
		{"assign to unknown cell", Command{Op: OpAssign, Assign: &api.AssignPrefixRequest{Prefix: "/x", Cell: "nope"}}, api.CodeNotFound},
		{"assign a nested path", Command{Op: OpAssign, Assign: &api.AssignPrefixRequest{Prefix: "/x/y", Cell: "demo"}}, api.CodeInvalidPath},
		{"migrate unknown prefix", Command{Op: OpMigrate, Migrate: &api.MigrateRequest{Prefix: "/nope", Action: api.MigrateBegin, To: "demo", Driver: "d1"}}, api.CodeNotFound},
		{"migrate to unknown cell", Command{Op: OpMigrate, Migrate: &api.MigrateRequest{Prefix: "/demo", Action: api.MigrateBegin, To: "nope", Driver: "d1"}}, api.CodeNotFound},
		{"migrate to the same cell", Command{Op: OpMigrate, Migrate: &api.MigrateRequest{Prefix: "/demo", Action: api.MigrateBegin, To: "demo", Driver: "d1"}}, api.CodeConflict},
		{"commit without a migration", Command{Op: OpMigrate, Migrate: &api.MigrateRequest{Prefix: "/demo", Action: api.MigrateCommit}}, api.CodeConflict},
		{"unknown op", Command{Op: "frobnicate"}, api.CodeBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := bootstrapped(t, 5)
			var before bytes.Buffer
			_ = a.s.Save(&before)
			r := a.do(c.cmd)
			if r.Err == nil || r.Err.Code != c.code {
				t.Fatalf("got %v, want %s", r.Err, c.code)
			}
			var after bytes.Buffer
			_ = a.s.Save(&after)
			// The index moves; nothing else may.
			if trimIndex(before.Bytes()) != trimIndex(after.Bytes()) {
				t.Fatalf("a refused command changed the state:\n%s\n%s", before.String(), after.String())
			}
		})
	}
}

func TestPlaceNeedsEnoughLockds(t *testing.T) {
	if _, err := Place(lockds(3), nil, 5); err == nil || err.Code != api.CodeConflict {
		t.Fatalf("5 replicas on 3 lockds: %v", err)
	}
}

func trimIndex(b []byte) string {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	delete(m, "index")
	out, _ := json.Marshal(m)
	return string(out)
}

// TestMigrationCommitAndAbortExclude: whichever of commit and abort the
// directory applies first decides the move; the other is refused.
func TestMigrationCommitAndAbortExclude(t *testing.T) {
	a := bootstrapped(t, 6)
	a.do(Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "b"}})
	var began uint64
	step := func(action, to string, seal uint64) Result {
		r := a.do(Command{Op: OpMigrate, Migrate: &api.MigrateRequest{Prefix: "/demo", Action: action, To: to, SealIndex: seal, BeganAt: began, Driver: "d1", Nodes: 3, Digest: "x"}})
		if action == api.MigrateBegin && r.Err == nil {
			began = r.Prefix.Migration.BeganAt
		}
		return r
	}
	if r := step(api.MigrateBegin, "b", 0); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := step(api.MigrateBegin, "b", 0); r.Err != nil {
		t.Fatalf("resuming begin refused: %v", r.Err)
	}
	if r := step(api.MigrateCommit, "", 0); codeOf(r) != api.CodeConflict {
		t.Fatalf("commit before the seal is recorded: %v", r.Err)
	}
	began--
	if r := step(api.MigrateSealed, "", 42); codeOf(r) != api.CodeConflict {
		t.Fatalf("a step naming another migration: %v", r.Err)
	}
	began++
	step(api.MigrateSealed, "", 42)
	if r := step(api.MigrateCommit, "", 0); r.Err != nil || r.Prefix.Cell != "b" || r.Prefix.Epoch != 2 {
		t.Fatalf("commit: %+v %v", r.Prefix, r.Err)
	}
	if r := step(api.MigrateCommit, "", 0); r.Err != nil || r.Prefix.Epoch != 2 {
		t.Fatalf("a second commit must change nothing: %+v %v", r.Prefix, r.Err)
	}
	if r := step(api.MigrateAbort, "", 0); codeOf(r) != api.CodeConflict {
		t.Fatalf("abort after commit: %v", r.Err)
	}
	if r := step(api.MigrateEnd, "", 0); r.Err != nil || r.Prefix.Migration != nil {
		t.Fatalf("end: %+v %v", r.Prefix, r.Err)
	}
	// Back to demo, aborted this time.
	step(api.MigrateBegin, "demo", 0)
	if r := step(api.MigrateBegin, "b", 0); codeOf(r) != api.CodeConflict {
		t.Fatalf("a second migration in flight accepted: %v", r.Err)
	}
	step(api.MigrateSealed, "", 50)
	if r := step(api.MigrateAbort, "", 0); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := step(api.MigrateCommit, "", 0); codeOf(r) != api.CodeConflict {
		t.Fatalf("commit after abort: %v", r.Err)
	}
	r := step(api.MigrateEnd, "", 0)
	if r.Err != nil || r.Prefix.Cell != "b" || r.Prefix.Epoch != 2 {
		t.Fatalf("after the abort the prefix must stay on b at epoch 2: %+v %v", r.Prefix, r.Err)
	}
}

func TestRegisterProxy(t *testing.T) {
	a := bootstrapped(t, 5)
	for _, c := range []struct {
		p    api.ProxyInfo
		code api.Code
	}{
		{api.ProxyInfo{Name: "p1", APIAddr: "127.0.0.1:7201"}, ""},
		{api.ProxyInfo{Name: "p2", APIAddr: "127.0.0.1:7202", Zone: "b"}, ""},
		{api.ProxyInfo{Name: "p1", APIAddr: "127.0.0.1:7203"}, ""}, // moved: the new address replaces the old
		{api.ProxyInfo{Name: "p3", APIAddr: "127.0.0.1:7202"}, api.CodeConflict},
		{api.ProxyInfo{Name: "Bad Name", APIAddr: "127.0.0.1:7204"}, api.CodeBadRequest},
		{api.ProxyInfo{Name: "p4"}, api.CodeBadRequest},
	} {
		r := a.do(Command{Op: OpRegisterProxy, Proxy: &c.p})
		if got := api.Code(""); r.Err != nil {
			got = r.Err.Code
			if got != c.code {
				t.Errorf("register %+v: %v, want %q", c.p, r.Err, c.code)
			}
		} else if c.code != "" {
			t.Errorf("register %+v accepted, want %q", c.p, c.code)
		}
	}
	got := a.s.Response().Proxies
	if len(got) != 2 || got[0].Name != "p1" || got[0].APIAddr != "127.0.0.1:7203" || got[1].Zone != "b" {
		t.Fatalf("proxies %+v", got)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	a := bootstrapped(t, 6, "a", "b")
	a.do(Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "b", Replicas: 3}})
	a.do(Command{Op: OpAssign, Assign: &api.AssignPrefixRequest{Prefix: "/orders", Cell: "b"}})
	a.do(Command{Op: OpMigrate, Migrate: &api.MigrateRequest{Prefix: "/demo", Action: api.MigrateBegin, To: "b", Driver: "d1"}})
	a.do(Command{Op: OpRegisterProxy, Proxy: &api.ProxyInfo{Name: "p1", APIAddr: "127.0.0.1:7201", Zone: "a"}})
	var one, two bytes.Buffer
	if err := a.s.Save(&one); err != nil {
		t.Fatal(err)
	}
	s2 := NewState()
	if err := s2.Load(bytes.NewReader(one.Bytes())); err != nil {
		t.Fatal(err)
	}
	_ = s2.Save(&two)
	if one.String() != two.String() {
		t.Fatalf("snapshot does not round-trip:\n%s\n%s", one.String(), two.String())
	}
}
