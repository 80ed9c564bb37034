package chaos

import (
	"reflect"
	"slices"
	"testing"
)

// TestNemesesCoverKinds: every kind the schedule draws has exactly one
// nemesis; the partition kinds (left out without namespaces) are exactly
// those that need namespaces; a leader, if needed, is resolved last.
func TestNemesesCoverKinds(t *testing.T) {
	seen := map[FaultKind]int{}
	for _, m := range nemeses {
		seen[m.Kind()]++
		needs := m.Needs()
		if slices.Contains(needs, needNetns) != partitionKinds[m.Kind()] {
			t.Errorf("%s: needs %v, partition kind %v", m.Kind(), needs, partitionKinds[m.Kind()])
		}
		if i := slices.Index(needs, needLeader); i >= 0 && i != len(needs)-1 {
			t.Errorf("%s: needLeader is not last in %v", m.Kind(), needs)
		}
	}
	for _, k := range roundBag {
		if seen[k] != 1 {
			t.Errorf("%s: %d nemeses", k, seen[k])
		}
	}
	if len(seen) != len(nemeses) {
		t.Errorf("%d kinds for %d nemeses", len(seen), len(nemeses))
	}
	for k := range seen {
		if !slices.Contains(roundBag, k) {
			t.Errorf("%s is in no round", k)
		}
	}
}

// TestUnmet: the first unmet precondition skips a step, with the reason
// in the executor's log.
func TestUnmet(t *testing.T) {
	all := capabilities{netns: true, proxies: true, holder: true, faultsBuild: true, backups: true}
	for _, tc := range []struct {
		kind FaultKind
		caps capabilities
		want string // "" : met
	}{
		{KillLeader, capabilities{}, ""}, // the leader is the executor's to find
		{KillThree, capabilities{}, ""},
		{MovePrefix, capabilities{}, ""},
		{IsolateLeader, all, ""},
		{IsolateLeader, capabilities{proxies: true}, "no network namespaces: partition skipped"},
		{SplitCell, capabilities{}, "no network namespaces: partition skipped"},
		{KillProxy, capabilities{netns: true}, "no proxies: kill-proxy skipped"},
		{KillHolder, capabilities{}, "no holder process"},
		{PauseHolder, all, ""},
		{SlowFsync, capabilities{}, "slow-fsync: lockd is not a lockd_faults build"},
		{FailFsync, capabilities{}, "fail-fsync: lockd is not a lockd_faults build"},
		{ExpireInFlight, capabilities{}, "expire-in-flight: lockd is not a lockd_faults build"},
		{RestoreOld, capabilities{}, "restore-old: no backup store, or an earlier restore failed"},
		{MoveNewCell, capabilities{fresh: maxFreshCells - 1}, ""},
		{MoveNewCell, capabilities{fresh: maxFreshCells}, "move-new-cell: 3 cells created already"},
	} {
		m, ok := nemesisOf(tc.kind)
		if !ok {
			t.Fatalf("no nemesis %s", tc.kind)
		}
		got := ""
		if err := unmet(tc.kind, m.Needs(), tc.caps); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s with %+v: %q, want %q", tc.kind, tc.caps, got, tc.want)
		}
	}
}

// TestVictims: the replicas a step takes follow its pick alone (the
// figures are those of the executor before the nemeses were types).
func TestVictims(t *testing.T) {
	ids := []int{1, 2, 3, 4, 5}
	for _, tc := range []struct {
		whom   whom
		pick   uint64
		leader int
		want   []int
	}{
		{theLeader, 7, 3, []int{3}},
		{oneFollower, 7, 3, []int{1}},
		{oneFollower, 8, 3, []int{4}},
		{anyTwo, 7, 3, []int{2, 5}},
		{anyTwo, 8, 3, []int{3, 4}},
	} {
		got := tc.whom.victims(Step{Pick: tc.pick}, ids, tc.leader)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("whom %d pick %d leader %d: %v, want %v", tc.whom, tc.pick, tc.leader, got, tc.want)
		}
		if tc.whom == oneFollower && slices.Contains(got, tc.leader) {
			t.Errorf("a follower fault took the leader")
		}
	}
	if f := failoverOf("kill-two", []int{2, 3}, 3); f != "kill-two" {
		t.Errorf("failoverOf with the leader: %q", f)
	}
	if f := failoverOf("kill-two", []int{2, 4}, 3); f != "" {
		t.Errorf("failoverOf without the leader: %q", f)
	}
}
