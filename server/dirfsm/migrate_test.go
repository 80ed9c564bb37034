package dirfsm

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestMigrationOneDriver (issue 23, finding 1): one driver per migration;
// another's begin is refused unless it takes over, after which the first
// driver's steps are refused; a commit whose copy differs from the seal
// is refused and changes nothing.
func TestMigrationOneDriver(t *testing.T) {
	a := bootstrapped(t, 6)
	a.do(Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "b"}})
	var began uint64
	step := func(action, driver string, takeOver bool, nodes int, digest string) Result {
		r := a.do(Command{Op: OpMigrate, Migrate: &api.MigrateRequest{Prefix: "/demo", Action: action, To: "b", SealIndex: 42, BeganAt: began,
			Driver: driver, TakeOver: takeOver, Nodes: nodes, Digest: digest}})
		if action == api.MigrateBegin && r.Err == nil {
			began = r.Prefix.Migration.BeganAt
		}
		return r
	}
	cases := []struct {
		name, action, driver string
		takeOver             bool
		nodes                int
		digest               string
		want                 api.Code
	}{
		{"begin without a driver", api.MigrateBegin, "", false, 0, "", api.CodeBadRequest},
		{"begin", api.MigrateBegin, "A", false, 0, "", ""},
		{"its own begin again", api.MigrateBegin, "A", false, 0, "", ""},
		{"a second driver", api.MigrateBegin, "B", false, 0, "", api.CodeMigrationInProgress},
		{"a second driver's seal record", api.MigrateSealed, "B", false, 7, "d7", api.CodeMigrationInProgress},
		{"the seal", api.MigrateSealed, "A", false, 7, "d7", ""},
		{"a different seal", api.MigrateSealed, "A", false, 8, "d8", api.CodeConflict},
		{"a second driver's commit", api.MigrateCommit, "B", false, 7, "d7", api.CodeMigrationInProgress},
		{"a take-over", api.MigrateBegin, "B", true, 0, "", ""},
		{"the first driver's commit", api.MigrateCommit, "A", false, 7, "d7", api.CodeMigrationInProgress},
		{"a commit of a short copy", api.MigrateCommit, "B", false, 6, "d7", api.CodeCopyMismatch},
		{"a commit of another copy", api.MigrateCommit, "B", false, 7, "d6", api.CodeCopyMismatch},
		{"a driver name too long", api.MigrateCommit, string(make([]byte, api.MaxMigrationDriver+1)), false, 7, "d7", api.CodeBadRequest},
	}
	gen := uint64(0)
	for _, tc := range cases {
		before := a.s.prefixes["/demo"]
		var keep api.PrefixInfo
		if before != nil {
			keep = *clonePrefix(before)
		}
		r := step(tc.action, tc.driver, tc.takeOver, tc.nodes, tc.digest)
		if codeOf(r) != tc.want {
			t.Fatalf("%s: %v, want %q", tc.name, r.Err, tc.want)
		}
		if tc.want != "" {
			after := *clonePrefix(a.s.prefixes["/demo"])
			if after.Cell != keep.Cell || after.Epoch != keep.Epoch || (after.Migration == nil) != (keep.Migration == nil) ||
				after.Migration != nil && *after.Migration != *keep.Migration {
				t.Fatalf("%s: refused, yet changed %+v to %+v", tc.name, keep, after)
			}
			continue
		}
		m := r.Prefix.Migration
		if tc.name == "a take-over" && (m.Driver != "B" || m.Gen <= gen) {
			t.Fatalf("take-over: %+v, want driver B at a generation above %d", *m, gen)
		}
		gen = m.Gen
	}
	if r := step(api.MigrateCommit, "B", false, 7, "d7"); r.Err != nil || r.Prefix.Cell != "b" || r.Prefix.Epoch != 2 {
		t.Fatalf("commit of the right copy: %+v %v", r.Prefix, r.Err)
	}
	if r := step(api.MigrateBegin, "C", false, 0, ""); r.Err != nil || r.Prefix.Migration.Phase != api.MigrationCommitted {
		t.Fatalf("a committed migration is finished by anyone: %+v %v", r.Prefix, r.Err)
	}
}

// TestMigrationBeganAtMS: a begin records the clock its command carries
// (the proposing lockd's) as the move's start; a take-over keeps it, and
// so does every replica replaying the entry (the state reads no clock).
func TestMigrationBeganAtMS(t *testing.T) {
	a := bootstrapped(t, 6)
	a.do(Command{Op: OpCreateCell, CreateCell: &api.CreateCellRequest{Name: "b"}})
	r := a.do(Command{Op: OpMigrate, AtMS: 1_000, Migrate: &api.MigrateRequest{Prefix: "/demo", Action: api.MigrateBegin, To: "b", Driver: "A"}})
	if r.Err != nil || r.Prefix.Migration.BeganAtMS != 1_000 {
		t.Fatalf("begin: %+v", r)
	}
	r = a.do(Command{Op: OpMigrate, AtMS: 9_000, Migrate: &api.MigrateRequest{Prefix: "/demo", Action: api.MigrateBegin, To: "b", Driver: "B", TakeOver: true}})
	if r.Err != nil || r.Prefix.Migration.BeganAtMS != 1_000 {
		t.Fatalf("take-over: %+v, want the start kept at 1000", r.Prefix.Migration)
	}
}
