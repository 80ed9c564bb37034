package lockd

import (
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/health"
)

func healthKey(cell string, lockd uint64) health.ReplicaKey {
	return health.ReplicaKey{Cell: cell, Lockd: lockd}
}

// The health record is pruned to the directory: a lockd removed and a
// move ended leave it, and a new move of a prefix starts its age afresh.
func TestSeenRecordFollowsDirectory(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r seenRecord
	r.answer(1, t0)
	r.answer(9, t0)
	move := func(began uint64) api.DirectoryResponse {
		return api.DirectoryResponse{Lockds: []api.LockdInfo{{ID: 1}, {ID: 2}},
			Prefixes: []api.PrefixInfo{{Prefix: "/p", Migration: &api.Migration{BeganAt: began}}, {Prefix: "/q"}}}
	}
	answered, moves := r.observe(move(5), t0)
	if len(answered) != 1 || !answered[1].Equal(t0) || len(moves) != 1 || !moves["/p"].Equal(t0) {
		t.Fatalf("first: %v %v", answered, moves)
	}
	if _, ok := r.answered[9]; ok {
		t.Fatal("a lockd the directory no longer lists is kept")
	}
	_, moves = r.observe(move(5), t0.Add(time.Minute))
	if !moves["/p"].Equal(t0) {
		t.Fatalf("the same move's first sighting moved: %v", moves)
	}
	_, moves = r.observe(move(7), t0.Add(2*time.Minute))
	if !moves["/p"].Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("a new move of the prefix kept the old one's age: %v", moves)
	}
	_, moves = r.observe(api.DirectoryResponse{}, t0.Add(3*time.Minute))
	if len(moves) != 0 || len(r.moves) != 0 {
		t.Fatalf("an ended move is kept: %v", r.moves)
	}
}

// TestMoveAgeFromItsBegin: a move's age counts from the begin's own clock
// as the directory recorded it, not from when this lockd first saw it (a
// lockd restarted under a stuck move would otherwise see it young for
// another MoveStuckAfter); a begin with no clock (an older lockd's) or
// one ahead of this lockd's counts from the first sighting. Mutant
// lockd_broken_moveageseen (always the first sighting) fails it. A move
// this lockd's last look did not show began after that look, whatever the
// proposer's clock says (one behind this lockd's).
func TestMoveAgeFromItsBegin(t *testing.T) {
	now := time.Unix(10_000, 0)
	cases := []struct {
		name     string
		began    int64     // BeganAtMS
		lastLook time.Time // a look at the directory without the move (zero: none)
		want     time.Time
	}{
		{"begun 10 minutes before this lockd saw it", now.Add(-10 * time.Minute).UnixMilli(), time.Time{}, now.Add(-10 * time.Minute)},
		{"no clock recorded", 0, time.Time{}, now},
		{"a clock ahead of this one", now.Add(time.Minute).UnixMilli(), time.Time{}, now},
		{"a clock behind this one's, the move new since the last look", now.Add(-time.Hour).UnixMilli(), now.Add(-5 * time.Second), now.Add(-5 * time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r seenRecord
			if !tc.lastLook.IsZero() {
				r.observe(api.DirectoryResponse{}, tc.lastLook)
			}
			dir := api.DirectoryResponse{Prefixes: []api.PrefixInfo{{Prefix: "/p", Migration: &api.Migration{BeganAt: 5, BeganAtMS: tc.began}}}}
			if _, moves := r.observe(dir, now); !moves["/p"].Equal(tc.want) {
				t.Fatalf("move dated %v, want %v", moves["/p"], tc.want)
			}
		})
	}
}

// A replica is dated from when its applied index last moved, but one not
// seen for a while (its lockd was down) starts afresh: back at its old
// index it is catching up, not stalled for the whole gap.
func TestSeenAppliedSince(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r seenRecord
	st := func(applied uint64) *api.StatusResponse {
		return &api.StatusResponse{Cells: []api.ReplicaStatus{{Cell: "demo", AppliedIndex: applied}}}
	}
	k := healthKey("demo", 2)
	r.sawStatus(2, st(10), t0)
	r.sawStatus(2, st(10), t0.Add(5*time.Second))
	if got := r.appliedSince()[k]; !got.Equal(t0) {
		t.Fatalf("unmoved: since %v, want %v", got, t0)
	}
	r.sawStatus(2, st(11), t0.Add(10*time.Second))
	if got := r.appliedSince()[k]; !got.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("moved: since %v", got)
	}
	back := t0.Add(10*time.Second + 5*time.Minute)
	r.sawStatus(2, st(11), back)
	if got := r.appliedSince()[k]; !got.Equal(back) {
		t.Fatalf("seen again after a gap at the same index: since %v, want %v", got, back)
	}
}
