package check

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/lockservice/lockd/api"
)

const lk = "/demo/chaos/locks/l0"

func obs(node string, index uint64, held bool, source string) LockObs {
	return LockObs{Lock: lk, Node: lk + "/" + node, Mode: ModeOf(node), Index: index, Held: held, Source: source}
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
	if _, vs := CheckMutualExclusion(good, nil); len(vs) != 0 {
		t.Fatalf("good history: %v", vs)
	}
	// Broken: the service (or a client's replay of it) shows two exclusive
	// holders at index 13.
	two := append(append([]LockObs(nil), good...), obs("w-0000000002", 13, true, "lockstate"))
	_, vs := CheckMutualExclusion(two, nil)
	wantViolations(t, "two exclusive holders", vs, 1)
	// Broken: a write lock granted while a read lock still held.
	rw := append(append([]LockObs(nil), good...), obs("w-0000000005", 23, true, "lockstate"))
	_, vs = CheckMutualExclusion(rw, nil)
	wantViolations(t, "write beside read", vs, 1) // w-5 at 23 overlaps r-3, held to 24
	// Broken: a node waiting again after it held.
	back := append(append([]LockObs(nil), good...), obs("w-0000000001", 16, false, "children"))
	_, vs = CheckMutualExclusion(back, nil)
	wantViolations(t, "held then waiting", vs, 1)

	// A held span ends at the node's deletion, not at its last sample: w-1
	// was last seen holding at 14 but deleted only at 18, so w-2 seen
	// holding at 16 held beside it. Without the deletion the samples alone
	// cannot tell.
	late := append(append([]LockObs(nil), good[:3]...), obs("w-0000000002", 16, true, "lockstate"))
	if _, vs := CheckMutualExclusion(late, nil); len(vs) != 0 {
		t.Fatalf("samples only: %v", vs)
	}
	del := []Deletion{{Lock: lk, Node: lk + "/w-0000000001", Index: 18}}
	_, vs = CheckMutualExclusion(late, del)
	wantViolations(t, "held before its predecessor's deletion", vs, 1)
	// Deleted at 16: w-1 held through 15 and w-2 from 16, a clean handoff.
	del[0].Index = 16
	if _, vs := CheckMutualExclusion(late, del); len(vs) != 0 {
		t.Fatalf("handoff at the deletion: %v", vs)
	}
}

// TestIntervalsChecker: holders one after the other (with the drift gap)
// and shared holders together pass; a client whose grant returned while
// another's Context was still live fails, as does an overlap of a writer
// and a reader; an overlap within the margin does not.
func TestIntervalsChecker(t *testing.T) {
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	iv := func(w, node string, start, end int) Interval {
		return Interval{Lock: lk, Node: lk + "/" + node, Worker: w, Mode: ModeOf(node), Start: ms(start), End: ms(end)}
	}
	good := []Interval{
		iv("a", "w-0000000001", 0, 100),
		iv("b", "w-0000000002", 110, 200),
		iv("c", "r-0000000003", 300, 400),
		iv("d", "r-0000000004", 350, 450),
		iv("e", "w-0000000005", 455, 500),
		iv("f", "w-0000000006", 499, 600), // 1 ms overlap: within the margin
	}
	if n, vs := CheckIntervals(good, ms(5)); n != len(good) || len(vs) != 0 {
		t.Fatal(n, vs)
	}
	early := append(append([]Interval(nil), good...), iv("g", "w-0000000007", 150, 250)) // granted one step early
	_, vs := CheckIntervals(early, ms(5))
	wantViolations(t, "grant while another holds", vs, 1)
	rw := append(append([]Interval(nil), good...), iv("h", "w-0000000008", 420, 430))
	_, vs = CheckIntervals(rw, ms(5))
	wantViolations(t, "writer beside readers", vs, 1) // d holds to 450; e starts at 455
}

// TestHoldersOf applies the lock rules to a listing.
func TestHoldersOf(t *testing.T) {
	modes, held := HoldersOf([]string{"r-0000000002", "w-0000000004", "r-0000000001", "r-0000000005", "other"})
	if len(modes) != 4 || !held["r-0000000001"] || !held["r-0000000002"] || held["w-0000000004"] || held["r-0000000005"] {
		t.Fatalf("modes %v held %v", modes, held)
	}
	_, held = HoldersOf([]string{"w-0000000007", "r-0000000008"})
	if !held["w-0000000007"] || held["r-0000000008"] {
		t.Fatalf("held %v", held)
	}
}

// TestFencingChecker: the checker replays the resource's attempts itself.
// A paused holder's late write refused by the fence passes; the same
// history from a broken lock service or SDK, in which the old holder still
// believed it held when it was refused, fails, with the fence working. So
// do a resource whose verdicts break the fence's rule (it accepted a stale
// write: three facets), accepted writes from a session that does not own
// the token's node or with a token nobody was granted, and a stale read.
func TestFencingChecker(t *testing.T) {
	grants := []Grant{
		{Lock: lk, Node: lk + "/w-0000000001", Mode: api.LockExclusive, Token: api.MakeToken(1, 10), Session: 5, Owner: 5, CreateIndex: 10, Epoch: 1, Worker: "old"},
		{Lock: lk, Node: lk + "/w-0000000002", Mode: api.LockExclusive, Token: api.MakeToken(1, 20), Session: 6, Owner: 6, CreateIndex: 20, Epoch: 1, Worker: "new"},
	}
	lobs := []LockObs{obs("w-0000000001", 11, true, "lockstate"), obs("w-0000000002", 25, true, "lockstate")}
	old, nw := api.MakeToken(1, 10), api.MakeToken(1, 20)
	w := func(seq, token, session uint64, writer string, accepted, liveKnown, live bool) Write {
		return Write{Seq: seq, Lock: lk, Token: token, Session: session, Writer: writer, Accepted: accepted, LiveKnown: liveKnown, LiveAfter: live}
	}
	// The old holder lost its lock (its Context ended) and its late write
	// is refused: correct.
	paused := []Write{w(1, old, 5, "old", true, true, true), w(2, nw, 6, "new", true, true, true), w(3, old, 5, "old", false, true, false)}
	if _, vs := CheckFencing(paused, grants, lobs); len(vs) != 0 {
		t.Fatalf("fenced late write: %v", vs)
	}
	// A holder process (no Context known here) refused: also correct.
	proc := []Write{w(1, old, 5, "holder", true, false, false), w(2, nw, 6, "new", true, true, true), w(3, old, 5, "holder", false, false, false)}
	if _, vs := CheckFencing(proc, grants, lobs); len(vs) != 0 {
		t.Fatalf("holder process refused: %v", vs)
	}
	// The lock service or SDK granted "new" while "old" still held: the
	// fence refuses old's write, but old's Context is still live.
	twoHolders := []Write{w(1, old, 5, "old", true, true, true), w(2, nw, 6, "new", true, true, true), w(3, old, 5, "old", false, true, true)}
	_, vs := CheckFencing(twoHolders, grants, lobs)
	wantViolations(t, "refused while live", vs, 1)

	// A resource that accepted the stale write: its verdict breaks the
	// rule, the accepted tokens go down, and the holders interleave.
	unfenced := []Write{w(1, old, 5, "old", true, false, false), w(2, nw, 6, "new", true, false, false), w(3, old, 5, "old", true, false, false)}
	_, vs = CheckFencing(unfenced, grants, lobs)
	wantViolations(t, "unfenced resource", vs, 3)

	// A write from a session that does not own the token's node, and one
	// with a token nobody was granted.
	_, vs = CheckFencing([]Write{w(1, nw, 5, "impostor", true, false, false), w(2, api.MakeToken(1, 30), 6, "forger", true, false, false)}, grants, lobs)
	wantViolations(t, "wrong session and unknown token", vs, 2)

	// A grant the service never saw holding.
	_, vs = CheckFencing([]Write{w(1, nw, 6, "new", true, false, false)}, grants, lobs[:1])
	wantViolations(t, "never held", vs, 1)

	// Shared holders: reads do not raise the mark, and a read accepted
	// below the last write's token is a violation (verdict and order).
	reads := []Write{w(1, nw, 6, "new", true, false, false), {Seq: 2, Lock: lk, Token: old, Session: 5, Read: true, Accepted: true}}
	_, vs = CheckFencing(reads, grants, lobs)
	wantViolations(t, "stale read", vs, 2)
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
		{Client: 1, Key: k, Kind: ConfigCAS, Value: "z", Expect: 0, Call: ms(0), Return: ms(8), Outcome: OutcomeFail, Err: "node_exists"}, // lost the race to the put below
		{Client: 0, Key: k, Kind: ConfigPut, Value: "a", Call: ms(6), Return: ms(20), Outcome: OutcomeOK, Version: 1},
		{Client: 1, Key: k, Kind: ConfigCAS, Value: "b", Expect: 1, Call: ms(15), Return: ms(30), Outcome: OutcomeOK, Version: 2},
		{Client: 2, Key: k, Kind: ConfigCAS, Value: "x", Expect: 1, Call: ms(31), Return: ms(40), Outcome: OutcomeFail, Err: "version_mismatch"},
		// Refused for routing (nothing applied), whatever the version.
		{Client: 4, Key: k, Kind: ConfigCAS, Value: "q", Expect: 2, Call: ms(42), Return: ms(45), Outcome: OutcomeFail, Err: "wrong_cell"},
		{Client: 2, Key: k, Kind: ConfigPut, Value: "c", Call: ms(41), Outcome: OutcomeUnknown},
		{Client: 0, Key: k, Kind: ConfigGet, Call: ms(50), Return: ms(55), Outcome: OutcomeOK, Exists: true, GotValue: "b", Version: 2},
		{Client: 0, Key: k, Kind: ConfigGet, Call: ms(60), Return: ms(65), Outcome: OutcomeOK, Exists: true, GotValue: "c", Version: 3},
	}
	if r := CheckLinearizable(good, 10*time.Second); r.Result != porcupine.Ok || len(r.Violations) != 0 {
		t.Fatalf("good history: %v %v", r.Result, r.Violations)
	}
	bad := map[string]ConfigOp{
		"stale read":                         {Client: 3, Key: k, Kind: ConfigGet, Call: ms(32), Return: ms(33), Outcome: OutcomeOK, Exists: true, GotValue: "a", Version: 1},
		"cas on a wrong version":             {Client: 3, Key: k, Kind: ConfigCAS, Value: "y", Expect: 1, Call: ms(31), Return: ms(40), Outcome: OutcomeOK, Version: 2},
		"lost write":                         {Client: 3, Key: k, Kind: ConfigGet, Call: ms(70), Return: ms(75), Outcome: OutcomeOK, Exists: false},
		"create over an existing node":       {Client: 3, Key: k, Kind: ConfigCAS, Value: "w", Expect: 0, Call: ms(31), Return: ms(40), Outcome: OutcomeOK, Version: 1},
		"cas refused on the current version": {Client: 3, Key: k, Kind: ConfigCAS, Value: "v", Expect: 2, Call: ms(31), Return: ms(40), Outcome: OutcomeFail, Err: "version_mismatch"},
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
	// A history porcupine cannot decide in time fails the run.
	var many []ConfigOp
	for i := range 200 {
		many = append(many, ConfigOp{Client: i, Key: k, Kind: ConfigPut, Value: fmt.Sprint(i), Call: ms(0), Outcome: OutcomeUnknown})
		many = append(many, ConfigOp{Client: 1000 + i, Key: k, Kind: ConfigGet, Call: ms(1), Return: ms(1000), Outcome: OutcomeOK, Exists: true, GotValue: fmt.Sprint(199 - i), Version: uint64(1 + i%3)})
	}
	if r := CheckLinearizable(many, time.Millisecond); r.Result != porcupine.Unknown || len(r.Violations) != 1 {
		t.Fatalf("undecided history: %v %v", r.Result, r.Violations)
	} else {
		t.Logf("undecided: found: %s", r.Violations[0].Detail)
	}
}

// TestDurabilityCheckers: a lost or changed acknowledged write, and a
// session expired under a healthy client, are violations.
func TestDurabilityCheckers(t *testing.T) {
	acked := []AckedWrite{{"/demo/a", "1"}, {"/demo/b", "2"}, {"/demo/c", "3"}}
	if _, vs := CheckAcked(acked, map[string]string{"/demo/a": "1", "/demo/b": "2", "/demo/c": "3"}, nil); len(vs) != 0 {
		t.Fatal(vs)
	}
	_, vs := CheckAcked(acked, map[string]string{"/demo/a": "1", "/demo/b": "x"}, nil)
	wantViolations(t, "lost and changed writes", vs, 2)
	_, vs = CheckAcked(acked, map[string]string{"/demo/a": "1", "/demo/b": "2"}, map[string]bool{"/demo/c": true})
	wantViolations(t, "unreadable write", vs, 1)
	lease, grace := 12*time.Second, 45*time.Second
	loss := SessionLoss{Worker: "lock0-w1", Session: 7, At: 30 * time.Second, Err: "session_expired"}
	// A fail-over of 2 s (no commit from 20 s to 22 s) must not cost a session.
	vs, excused := CheckSessions([]SessionLoss{loss}, []Window{{Start: 20 * time.Second, End: 22 * time.Second}}, lease, grace)
	wantViolations(t, "session lost to a short fail-over", vs, 1)
	if len(excused) != 0 {
		t.Fatal(excused)
	}
	// Nor an outage longer than the lease: no leader expires nobody.
	vs, excused = CheckSessions([]SessionLoss{loss}, []Window{{Start: 10 * time.Second, End: 25 * time.Second}}, lease, grace)
	wantViolations(t, "session lost near an outage of a lease", vs, 1)
	if len(excused) != 0 {
		t.Fatal(excused)
	}
	// Only one of lease + grace, after which the client itself gives up.
	late := loss
	late.At = 70 * time.Second
	vs, excused = CheckSessions([]SessionLoss{late}, []Window{{Start: 10 * time.Second, End: 68 * time.Second}}, lease, grace)
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
