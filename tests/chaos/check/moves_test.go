package check

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const mS = time.Millisecond

// TestSingleServerChecker: a clean move (old cell sealed, then the new one
// serving at epoch+1) passes; two cells serving one epoch, and a restored
// cell serving the prefix at its old epoch after the move, fail.
func TestSingleServerChecker(t *testing.T) {
	s := func(cell, state string, epoch uint64, start, end time.Duration) ServeSample {
		return ServeSample{Cell: cell, Prefix: "/side", State: state, Epoch: epoch, Start: start * mS, End: end * mS}
	}
	good := []ServeSample{
		s("side", "serving", 1, 0, 5),
		s("demo", "", 0, 0, 5),
		s("side", "sealed", 1, 100, 105),
		s("demo", "staged", 2, 100, 106),
		s("side", "serving", 1, 98, 120), // overlaps the new cell's first read: not judged
		s("demo", "serving", 2, 110, 115),
		s("side", "sealed", 1, 200, 205),
		s("demo", "serving", 2, 200, 206),
	}
	if n, vs := CheckSingleServer(good); len(vs) != 0 || n != 4 {
		t.Fatalf("good history: %d samples, %v", n, vs)
	}
	// Broken (finding 3): side restored from a backup serves /side again at
	// its old epoch after demo served it at epoch 2.
	restored := append(append([]ServeSample(nil), good...), s("side", "serving", 1, 300, 305), s("demo", "serving", 2, 300, 306))
	_, vs := CheckSingleServer(restored)
	wantViolations(t, "restored cell serving at the old epoch", vs, 1)
	// Broken (finding 1's double service): two cells at one epoch.
	twice := append(append([]ServeSample(nil), good...), s("side", "serving", 2, 400, 405))
	_, vs = CheckSingleServer(twice)
	wantViolations(t, "two cells at one epoch", vs, 1)
}

// TestPrefixWritesChecker: writes survive moves; a restore loses exactly
// those after its backup; both directions of a wrong restore fail.
func TestPrefixWritesChecker(t *testing.T) {
	w := func(key string, call, ret time.Duration) PrefixWrite {
		return PrefixWrite{Prefix: "/side", Key: "/side/a/" + key, Value: key, Call: call * mS, Return: ret * mS}
	}
	writes := []PrefixWrite{w("before", 0, 10), w("straddle", 95, 110), w("after", 130, 140), w("restoring", 190, 260), w("later", 400, 410)}
	r := RestoreEvent{Cell: "side", Prefixes: []string{"/side"}, BackupIndex: 77, BackupCall: 100 * mS, BackupReturn: 120 * mS, Start: 200 * mS, End: 300 * mS}
	good := map[string]string{"/side/a/before": "before", "/side/a/later": "later"}
	if n, vs := CheckPrefixWrites(writes, []RestoreEvent{r}, good, nil); len(vs) != 0 || n != 4 {
		t.Fatalf("good history: %d judged, %v", n, vs)
	}
	// Broken: a write acknowledged before the backup is gone (a move that
	// dropped the copy: finding 1).
	lost := map[string]string{"/side/a/later": "later"}
	_, vs := CheckPrefixWrites(writes, []RestoreEvent{r}, lost, nil)
	wantViolations(t, "acked write lost", vs, 1)
	// Broken: the write after the backup survived (the restore did not
	// restore, or restored a newer state).
	kept := map[string]string{"/side/a/before": "before", "/side/a/after": "after", "/side/a/later": "later"}
	_, vs = CheckPrefixWrites(writes, []RestoreEvent{r}, kept, nil)
	wantViolations(t, "write after the backup kept", vs, 1)
	// A restore of a cell the directory no longer gives /side loses nothing of it.
	other := r
	other.Prefixes = nil
	_, vs = CheckPrefixWrites(writes, []RestoreEvent{other}, good, nil)
	wantViolations(t, "restore of a cell without the prefix", vs, 3) // straddle, after, restoring must be there
}

// TestSessionSafeChecker: claims that end before the expiry pass; a
// SessionSafe after the expiry committed, or a lease running past it
// (finding 6: the proxy renews on unavailable), fail.
func TestSessionSafeChecker(t *testing.T) {
	ends := []SessionEnd{{Worker: "a", Session: 7, By: 1000 * mS, How: "told expired"}}
	good := []LeaseClaim{{Worker: "a", Session: 7, At: 100 * mS, Until: 900 * mS}, {Worker: "b", Session: 8, At: 2000 * mS, Until: 9000 * mS}}
	if _, vs := CheckSessionSafe(good, ends, nil, 50*mS); len(vs) != 0 {
		t.Fatalf("good history: %v", vs)
	}
	bad := append(append([]LeaseClaim(nil), good...),
		LeaseClaim{Worker: "a", Session: 7, At: 800 * mS, Until: 5800 * mS, Source: "safe-event"},
		LeaseClaim{Worker: "a", Session: 7, At: 1100 * mS, Until: 1200 * mS, Source: "safe-event"})
	_, vs := CheckSessionSafe(bad, ends, nil, 50*mS)
	wantViolations(t, "safe past the expiry", vs, 2)
	// An end inside an excused window (a restore) is not judged.
	if _, vs := CheckSessionSafe(bad, ends, []Window{{Start: 900 * mS, End: 1100 * mS}}, 50*mS); len(vs) != 0 {
		t.Fatalf("excused end: %v", vs)
	}
}

// TestMovedHoldsChecker: a grant after the old holder's lease (or after it
// acknowledged the loss) passes; one while its lease runs (finding 7)
// fails.
func TestMovedHoldsChecker(t *testing.T) {
	good := []MovedHold{
		{Lock: "/side/held", Holder: "h1", Waiter: "w", Until: 5000 * mS, Grant: 5100 * mS},
		{Lock: "/side/held", Holder: "h2", Waiter: "w", Until: 300 * mS, Acked: true, Grant: 350 * mS},
		{Lock: "/side/held", Holder: "h3", Waiter: "w", Until: 5000 * mS}, // no grant
	}
	if n, vs := CheckMovedHolds(good, 50*mS); len(vs) != 0 || n != 2 {
		t.Fatalf("good history: %d, %v", n, vs)
	}
	bad := append(append([]MovedHold(nil), good...),
		MovedHold{Lock: "/side/held", Holder: "h4", Waiter: "w", Until: 5000 * mS, Grant: 118 * mS},
		MovedHold{Lock: "/side/held", Holder: "h5", Waiter: "w", Until: 1000 * mS, LockDelay: 2000 * mS, Grant: 1500 * mS})
	_, vs := CheckMovedHolds(bad, 50*mS)
	wantViolations(t, "granted while the old lease runs", vs, 2)
}

// TestCachedReadsAcrossRestore: a key's history across a restore checks
// as two eras; a cached read after the restore that returns a value the
// restore lost, after a fresh read saw the backup's, fails; so does a
// stale cached read across a move (no restore).
func TestCachedReadsAcrossRestore(t *testing.T) {
	const k = "/side/chaos/cfg/k0"
	get := func(client int, call, ret time.Duration, v string, ver uint64) ConfigOp {
		return ConfigOp{Client: client, Key: k, Kind: ConfigGet, Call: call * mS, Return: ret * mS, Outcome: OutcomeOK, Exists: true, GotValue: v, Version: ver}
	}
	put := func(client int, call, ret time.Duration, v string, ver uint64) ConfigOp {
		return ConfigOp{Client: client, Key: k, Kind: ConfigPut, Value: v, Call: call * mS, Return: ret * mS, Outcome: OutcomeOK, Version: ver}
	}
	r := RestoreEvent{Cell: "side", Prefixes: []string{"/side"}, BackupCall: 15 * mS, BackupReturn: 18 * mS, Start: 100 * mS, End: 200 * mS}
	hist := []ConfigOp{
		put(1, 0, 10, "a", 1),  // in the backup
		put(1, 20, 30, "b", 2), // lost by the restore
		get(2, 40, 41, "b", 2),
		put(1, 90, 150, "c", 3),  // ran across the restore
		put(2, 160, 170, "d", 4), // acknowledged by the old cell after the plan, lost
		get(1, 175, 176, "d", 4), // the old cell still serving
		get(3, 210, 220, "a", 1), // fresh read of the restored state
		get(2, 230, 231, "a", 1),
	}
	res := CheckLinearizable(SplitRestoreEras(hist, []RestoreEvent{r}), time.Minute)
	if res.Result != porcupine.Ok {
		t.Fatalf("good history across a restore: %v %v", res.Result, res.Violations)
	}
	// Broken (finding 4): client 2's cache still serves the lost write.
	stale := append(append([]ConfigOp(nil), hist...), get(2, 240, 241, "b", 2))
	res = CheckLinearizable(SplitRestoreEras(stale, []RestoreEvent{r}), time.Minute)
	wantViolations(t, "stale cached read after a restore", res.Violations, 1)
	// Broken (finding 5): a put that timed out (unknown) committed, and a
	// cached read after a later read saw it still returns the old value.
	move := []ConfigOp{
		put(1, 0, 10, "a", 1),
		{Client: 1, Key: k, Kind: ConfigPut, Value: "b", Call: 20 * mS, Return: 30 * mS, Outcome: OutcomeUnknown},
		get(3, 40, 41, "b", 2),
		get(2, 50, 51, "a", 1),
	}
	res = CheckLinearizable(SplitRestoreEras(move, nil), time.Minute)
	wantViolations(t, "stale cached read after a timed-out write", res.Violations, 1)
}

// A write of a cached node is excused its outages and the longest span
// it shares with one fence, never two: a write held across two fences
// past its bound is a stall (a cacher that never lets go, say).
func TestFencedWriteStalls(t *testing.T) {
	w := func(a, b time.Duration) Window { return Window{Start: a, End: b} }
	write := []Op{{Start: 0, End: 30}}
	outages := []Window{w(0, 2)}
	fences := []Window{w(5, 13), w(10, 20)} // 8 and 10 long
	// 30 − 2 (outage) − 10 (the longer fence) = 18.
	if _, vs := CheckFencedWriteStalls(write, outages, fences, 17); len(vs) != 1 {
		t.Fatalf("stalled 18, bound 17: %v", vs)
	}
	if _, vs := CheckFencedWriteStalls(write, outages, fences, 18); len(vs) != 0 {
		t.Fatalf("stalled 18, bound 18: %v", vs)
	}
}

// An outage inside a fence (the election is both) is excused once: the
// union of the windows, not their sum.
func TestFencedWriteStallsCountOverlapsOnce(t *testing.T) {
	w := func(a, b time.Duration) Window { return Window{Start: a, End: b} }
	write := []Op{{Start: 0, End: 10}}
	outages := []Window{w(0, 2), w(1, 3)} // overlapping: 3 in all
	fences := []Window{w(0, 5)}           // covers the outages: 5 in all
	// 10 − 5 = 5 (summing would excuse 2 + 2 + 5 = 9 and leave 1).
	if _, vs := CheckFencedWriteStalls(write, outages, fences, 4); len(vs) != 1 {
		t.Fatalf("stalled 5, bound 4: %v", vs)
	}
	if _, vs := CheckWriteStalls(write, outages, 6); len(vs) != 1 {
		t.Fatalf("stalled 7 outside outages, bound 6: %v", vs)
	}
}
