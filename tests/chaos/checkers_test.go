package chaos

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk/fence"
)

const lk = "/demo/chaos/locks/l0"

func obs(node string, index uint64, held bool, source string) LockObs {
	return LockObs{Lock: lk, Node: lk + "/" + node, Mode: modeOf(node), Index: index, Held: held, Source: source}
}

func wantViolations(t *testing.T, what string, vs []Violation, want int) {
	t.Helper()
	if len(vs) != want {
		t.Fatalf("%s: %d violations, want %d: %v", what, len(vs), want, vs)
	}
	for _, v := range vs {
		t.Logf("%s: found: %s", what, v.Detail)
	}
}

// TestMutualExclusionChecker: the checker passes a history of handoffs and
// of shared holders together, and fails a deliberately broken one: two
// exclusive holders over overlapping indices, a write lock beside a read
// lock, and a node seen waiting after it held.
func TestMutualExclusionChecker(t *testing.T) {
	good := []LockObs{
		obs("w-0000000001", 10, true, "lockstate"),
		obs("w-0000000002", 11, false, "children"),
		obs("w-0000000001", 14, true, "children"),
		obs("w-0000000002", 15, true, "lockstate"), // after w-1 was deleted at 15
		obs("r-0000000003", 20, true, "children"),
		obs("r-0000000004", 21, true, "children"),
		obs("r-0000000003", 24, true, "lockstate"),
		obs("w-0000000005", 22, false, "children"), // waits behind the readers
		obs("w-0000000005", 30, true, "lockstate"),
	}
	if _, vs := CheckMutualExclusion(good); len(vs) != 0 {
		t.Fatalf("good history: %v", vs)
	}
	// Broken: the service (or a client's replay of it) shows two exclusive
	// holders at index 13.
	two := append(append([]LockObs(nil), good...), obs("w-0000000002", 13, true, "lockstate"))
	_, vs := CheckMutualExclusion(two)
	wantViolations(t, "two exclusive holders", vs, 1)
	// Broken: a write lock granted while a read lock still held.
	rw := append(append([]LockObs(nil), good...), obs("w-0000000005", 23, true, "lockstate"))
	_, vs = CheckMutualExclusion(rw)
	wantViolations(t, "write beside read", vs, 1) // w-5 at 23 overlaps r-3, held to 24
	// Broken: a node waiting again after it held.
	back := append(append([]LockObs(nil), good...), obs("w-0000000001", 16, false, "children"))
	_, vs = CheckMutualExclusion(back)
	wantViolations(t, "held then waiting", vs, 1)
}

// TestHoldersOf applies the lock rules to a listing.
func TestHoldersOf(t *testing.T) {
	modes, held := holdersOf([]string{"r-0000000002", "w-0000000004", "r-0000000001", "r-0000000005", "other"})
	if len(modes) != 4 || !held["r-0000000001"] || !held["r-0000000002"] || held["w-0000000004"] || held["r-0000000005"] {
		t.Fatalf("modes %v held %v", modes, held)
	}
	_, held = holdersOf([]string{"w-0000000007", "r-0000000008"})
	if !held["w-0000000007"] || held["r-0000000008"] {
		t.Fatalf("held %v", held)
	}
}

// TestFencingChecker: with the real fence a paused holder's late write is
// refused and the history passes; with the broken variant (a resource that
// does not check tokens) the same schedule is accepted and the checker
// fails it. Writes whose token belongs to another session, or that no
// grant carried, fail it too.
func TestFencingChecker(t *testing.T) {
	grants := []Grant{
		{Lock: lk, Node: lk + "/w-0000000001", Mode: api.LockExclusive, Token: api.MakeToken(1, 10), Session: 5, Owner: 5, CreateIndex: 10, Epoch: 1, Worker: "old"},
		{Lock: lk, Node: lk + "/w-0000000002", Mode: api.LockExclusive, Token: api.MakeToken(1, 20), Session: 6, Owner: 6, CreateIndex: 20, Epoch: 1, Worker: "new"},
	}
	lobs := []LockObs{obs("w-0000000001", 11, true, "lockstate"), obs("w-0000000002", 25, true, "lockstate")}
	schedule := func(r *Resource) {
		_ = r.Write(lk, api.MakeToken(1, 10), 5, "old") // the old holder, before its pause
		_ = r.Write(lk, api.MakeToken(1, 20), 6, "new") // the new holder's first write
		err := r.Write(lk, api.MakeToken(1, 10), 5, "old")
		if !r.Unchecked && !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("late write of the paused holder: %v, want stale", err)
		}
	}
	h := NewHistory()
	schedule(NewResource(h))
	if _, vs := CheckFencing(h.Snapshot().Writes, grants, lobs); len(vs) != 0 {
		t.Fatalf("fenced resource: %v", vs)
	}
	h = NewHistory()
	broken := NewResource(h)
	broken.Unchecked = true
	schedule(broken)
	_, vs := CheckFencing(h.Snapshot().Writes, grants, lobs)
	wantViolations(t, "unchecked resource", vs, 1)

	// A write from a session that does not own the token's node, and one
	// with a token nobody was granted.
	h = NewHistory()
	r := NewResource(h)
	_ = r.Write(lk, api.MakeToken(1, 20), 5, "impostor")
	_ = r.Write(lk, api.MakeToken(1, 30), 6, "forger")
	_, vs = CheckFencing(h.Snapshot().Writes, grants, lobs)
	wantViolations(t, "wrong session and unknown token", vs, 2)

	// A grant the service never saw holding.
	_, vs = CheckFencing([]Write{{Seq: 1, Lock: lk, Token: api.MakeToken(1, 20), Session: 6}}, grants, lobs[:1])
	wantViolations(t, "never held", vs, 1)

	// Shared holders: reads do not raise the mark, and a read below the
	// last write's token is a violation.
	reads := []Write{
		{Seq: 1, Lock: lk, Token: api.MakeToken(1, 20), Session: 6},
		{Seq: 2, Lock: lk, Token: api.MakeToken(1, 10), Session: 5, Read: true},
	}
	_, vs = CheckFencing(reads, grants, lobs)
	wantViolations(t, "stale read", vs, 1)
}

// TestLinearizabilityChecker: porcupine passes a legal history with
// unknown outcomes and concurrent operations, and fails broken ones: a
// stale read after an acknowledged put, a compare-and-set that succeeded
// on a wrong version, a lost acknowledged write.
func TestLinearizabilityChecker(t *testing.T) {
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	k := "/demo/chaos/config/k0"
	good := []ConfigOp{
		{Client: 0, Key: k, Kind: ConfigGet, Call: ms(0), Return: ms(5), Outcome: OutcomeOK, Exists: false},
		{Client: 1, Key: k, Kind: ConfigCAS, Value: "z", Expect: 0, Call: ms(0), Return: ms(8), Outcome: OutcomeFail}, // lost the race to the put below
		{Client: 0, Key: k, Kind: ConfigPut, Value: "a", Call: ms(6), Return: ms(20), Outcome: OutcomeOK, Version: 1},
		{Client: 1, Key: k, Kind: ConfigCAS, Value: "b", Expect: 1, Call: ms(15), Return: ms(30), Outcome: OutcomeOK, Version: 2},
		{Client: 2, Key: k, Kind: ConfigCAS, Value: "x", Expect: 1, Call: ms(31), Return: ms(40), Outcome: OutcomeFail},
		{Client: 2, Key: k, Kind: ConfigPut, Value: "c", Call: ms(41), Outcome: OutcomeUnknown},
		{Client: 0, Key: k, Kind: ConfigGet, Call: ms(50), Return: ms(55), Outcome: OutcomeOK, Exists: true, GotValue: "b", Version: 2},
		{Client: 0, Key: k, Kind: ConfigGet, Call: ms(60), Return: ms(65), Outcome: OutcomeOK, Exists: true, GotValue: "c", Version: 3},
	}
	if r := CheckLinearizable(good, 10*time.Second); r.Result != porcupine.Ok || len(r.Violations) != 0 {
		t.Fatalf("good history: %v %v", r.Result, r.Violations)
	}
	bad := map[string]ConfigOp{
		"stale read":                   {Client: 3, Key: k, Kind: ConfigGet, Call: ms(32), Return: ms(33), Outcome: OutcomeOK, Exists: true, GotValue: "a", Version: 1},
		"cas on a wrong version":       {Client: 3, Key: k, Kind: ConfigCAS, Value: "y", Expect: 1, Call: ms(31), Return: ms(40), Outcome: OutcomeOK, Version: 2},
		"lost write":                   {Client: 3, Key: k, Kind: ConfigGet, Call: ms(70), Return: ms(75), Outcome: OutcomeOK, Exists: false},
		"create over an existing node": {Client: 3, Key: k, Kind: ConfigCAS, Value: "w", Expect: 0, Call: ms(31), Return: ms(40), Outcome: OutcomeOK, Version: 1},
	}
	for name, op := range bad {
		r := CheckLinearizable(append(append([]ConfigOp(nil), good...), op), 10*time.Second)
		if r.Result != porcupine.Illegal || len(r.Violations) != 1 {
			t.Fatalf("%s: %v %v", name, r.Result, r.Violations)
		}
		if !strings.Contains(r.Violations[0].Detail, "not linearizable") {
			t.Fatalf("%s: %s", name, r.Violations[0].Detail)
		}
		t.Logf("%s: found:\n%s", name, r.Violations[0].Detail)
	}
}

// TestDurabilityCheckers: a lost or changed acknowledged write, and a
// session expired under a healthy client, are violations.
func TestDurabilityCheckers(t *testing.T) {
	acked := []AckedWrite{{"/demo/a", "1"}, {"/demo/b", "2"}, {"/demo/c", "3"}}
	if _, vs := CheckAcked(acked, map[string]string{"/demo/a": "1", "/demo/b": "2", "/demo/c": "3"}); len(vs) != 0 {
		t.Fatal(vs)
	}
	_, vs := CheckAcked(acked, map[string]string{"/demo/a": "1", "/demo/b": "x"})
	wantViolations(t, "lost and changed writes", vs, 2)
	lease, grace := 12*time.Second, 45*time.Second
	loss := SessionLoss{Worker: "lock0-w1", Session: 7, At: 30 * time.Second, Err: "session_expired"}
	// A fail-over of 2 s (no commit from 20 s to 22 s) must not cost a session.
	vs, excused := CheckSessions([]SessionLoss{loss}, []Window{{Start: 20 * time.Second, End: 22 * time.Second}}, lease, grace)
	wantViolations(t, "session lost to a short fail-over", vs, 1)
	if len(excused) != 0 {
		t.Fatal(excused)
	}
	// An outage longer than the lease may.
	vs, excused = CheckSessions([]SessionLoss{loss}, []Window{{Start: 10 * time.Second, End: 25 * time.Second}}, lease, grace)
	if len(vs) != 0 || len(excused) != 1 {
		t.Fatal(vs, excused)
	}
}

// TestNoQuorumChecker: a call that started while only two replicas ran and
// succeeded before the third came back is a violation; one that succeeded
// after, or a local call, is not.
func TestNoQuorumChecker(t *testing.T) {
	w := []Window{{Start: 10 * time.Second, End: 14 * time.Second, What: "no majority"}}
	ops := []Op{
		{Worker: "a", Kind: "lock", Start: 9 * time.Second, End: 11 * time.Second, OK: true},  // committed before the kill
		{Worker: "b", Kind: "lock", Start: 11 * time.Second, End: 15 * time.Second, OK: true}, // after the majority returned
		{Worker: "c", Kind: "config-get", Start: 12 * time.Second, End: 13 * time.Second},     // failed
		{Worker: "d", Kind: "fenced-write", Start: 12 * time.Second, End: 12 * time.Second, OK: true, Local: true},
	}
	if _, vs := CheckNoQuorum(ops, w); len(vs) != 0 {
		t.Fatal(vs)
	}
	ops = append(ops, Op{Worker: "e", Kind: "lock", Start: 11 * time.Second, End: 12 * time.Second, OK: true})
	_, vs := CheckNoQuorum(ops, w)
	wantViolations(t, "grant without a majority", vs, 1)
}

// TestLivenessChecker: a waiter never granted after the heal is a violation.
func TestLivenessChecker(t *testing.T) {
	grants := map[string][]time.Duration{"a": {time.Second, 12 * time.Second}, "b": {3 * time.Second}}
	if _, vs := CheckLiveness(grants, []string{"a"}, 10*time.Second, 5*time.Second); len(vs) != 0 {
		t.Fatal(vs)
	}
	_, vs := CheckLiveness(grants, []string{"a", "b", "c"}, 10*time.Second, 5*time.Second)
	wantViolations(t, "stuck waiters", vs, 2)
}

// TestSchedule: a seed reproduces its schedule; every round has every
// nemesis; without namespaces the partition nemeses are left out.
func TestSchedule(t *testing.T) {
	tm := Timing{Election: 2 * time.Second, Lease: 12 * time.Second}
	a, b := Schedule(42, tm, true, 3), Schedule(42, tm, true, 3)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different schedules")
	}
	if reflect.DeepEqual(a, Schedule(43, tm, true, 3)) {
		t.Fatal("different seeds, same schedule")
	}
	if len(a) != 3*len(roundBag) {
		t.Fatalf("%d steps", len(a))
	}
	for round := 0; round < 3; round++ {
		seen := map[FaultKind]int{}
		long := 0
		for _, s := range a[round*len(roundBag) : (round+1)*len(roundBag)] {
			seen[s.Kind]++
			if s.Long {
				long++
				if s.Hold <= tm.Lease {
					t.Errorf("long pause of %v", s.Hold)
				}
			}
			if s.Kind == PauseHolder && s.Hold <= tm.Lease {
				t.Errorf("holder pause of %v is not past the lease", s.Hold)
			}
			if s.Kind == KillThree && s.Hold >= tm.Lease/2 {
				t.Errorf("no-majority window of %v", s.Hold)
			}
		}
		for _, k := range roundBag {
			if seen[k] == 0 {
				t.Errorf("round %d has no %s", round, k)
			}
		}
		if long != 1 {
			t.Errorf("round %d: %d long leader pauses", round, long)
		}
	}
	for _, s := range Schedule(42, tm, false, 2) {
		if partitionKinds[s.Kind] {
			t.Fatalf("partition step %s without namespaces", s.Kind)
		}
	}
	t.Logf("seed 42:\n%s", describeSchedule(a[:len(roundBag)]))
}

// TestStats checks min, median and max.
func TestStats(t *testing.T) {
	s := statsOf([]Sample{{"", 3 * time.Millisecond}, {"", time.Millisecond}, {"", 2 * time.Millisecond}, {"", 10 * time.Millisecond}})
	if s.Min != 1 || s.Median != 3 || s.Max != 10 || s.N != 4 {
		t.Fatalf("%+v", s)
	}
	r := &Report{Seed: 7, DurationS: 1.26, Ops: 3, FailoverMS: s}
	if got := r.JSON(); got != `{"seed":7,"duration_s":1.3,"ops":3,"violations":0,"failovers":0,"failover_ms":{"min":1,"median":3,"max":10},"takeover_ms":{"min":0,"median":0,"max":0},"sessions_lost":0}` {
		t.Fatal(got)
	}
}
