package chaos

import (
	"reflect"
	"testing"
	"time"
)

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
	r := &Report{Seed: 7, DurationS: 1.26, Ops: 3, FailoverMS: s, Faults: map[string]int{"kill-leader": 2}}
	if got := r.JSON(); got != `{"seed":7,"duration_s":1.3,"ops":3,"violations":0,"failovers":0,"failover_ms":{"min":1,"median":3,"max":10},"takeover_ms":{"min":0,"median":0,"max":0},"sessions_lost":0,"intervals":0,"nemeses":{"kill-leader":2}}` {
		t.Fatal(got)
	}
}
