package dirfsm

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

// Replacing a replica: add a learner, promote it, remove the old one; one
// change at a time; a removal that would leave fewer than three voters,
// or a second replica on one lockd, is refused and changes nothing.
// codeOf is a result's error code ("" if none; r.Err is a typed pointer).
func codeOf(r Result) api.Code {
	if r.Err == nil {
		return ""
	}
	return r.Err.Code
}

func TestMemberChanges(t *testing.T) {
	a := bootstrapped(t, 7)
	member := func(action string, lockd uint64, learner bool) Result {
		return a.do(Command{Op: OpMember, Member: &api.MemberRequest{Cell: "demo", Action: action, Lockd: lockd, Learner: learner}})
	}
	voters := func() (n int) {
		for _, r := range a.s.Response().Cells[0].Replicas {
			if !r.Learner {
				n++
			}
		}
		return n
	}
	if r := member(api.MemberAdd, 3, true); codeOf(r) != api.CodeConflict {
		t.Fatalf("a second replica on lockd 3: %v", r.Err)
	}
	r := member(api.MemberAdd, 6, true)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	added := r.Cell.Replicas[len(r.Cell.Replicas)-1]
	if added.Lockd != 6 || !added.Learner || !added.JoinedLearner || added.Pending != api.MemberAdd || added.ReplicaID != 6 {
		t.Fatalf("added %+v", added)
	}
	if r := member(api.MemberAdd, 6, true); r.Err != nil {
		t.Fatalf("resuming the add: %v", r.Err)
	}
	if r := member(api.MemberAdd, 7, true); codeOf(r) != api.CodeConflict {
		t.Fatalf("a second change in flight: %v", r.Err)
	}
	member(api.MemberDone, 6, false)
	if r := member(api.MemberPromote, 1, false); codeOf(r) != api.CodeConflict {
		t.Fatalf("promoting a voter: %v", r.Err)
	}
	member(api.MemberPromote, 6, false)
	member(api.MemberDone, 6, false)
	if voters() != 6 {
		t.Fatalf("%d voters after the promotion, want 6", voters())
	}
	for _, id := range []uint64{1, 2, 3} {
		member(api.MemberRemove, id, false)
		member(api.MemberDone, id, false)
	}
	if r := member(api.MemberRemove, 4, false); codeOf(r) != api.CodeConflict || voters() != 3 {
		t.Fatalf("removing the fourth of six voters (3 left → 2): %v, %d voters", r.Err, voters())
	}
	if r := member(api.MemberRemove, 1, false); codeOf(r) != api.CodeNotFound {
		t.Fatalf("removing a replica that is gone: %v", r.Err)
	}
	// An add the cell could not commit is taken back; its id is never reused.
	member(api.MemberAdd, 7, false)
	member(api.MemberAbort, 7, false)
	r = member(api.MemberAdd, 7, false)
	if got := r.Cell.Replicas[len(r.Cell.Replicas)-1].ReplicaID; got != 8 {
		t.Fatalf("replica id after an aborted add: %d, want 8 (ids are never reused)", got)
	}
}
