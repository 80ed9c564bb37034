package cell

import (
	"context"
	"strconv"
	"testing"
)

// traceAt is a trace whose marks are at the given nanoseconds (0: not
// reached).
func traceAt(at map[Mark]int64) *Trace {
	t := &Trace{}
	for m, ns := range at {
		t.at[m] = ns
	}
	return t
}

// TestTraceStages: each stage spans from the previous mark reached; a
// proposal whose apply was not seen shows commit through the return; a
// request refused early shows what it passed and its total.
func TestTraceStages(t *testing.T) {
	full := map[Mark]int64{MarkReceived: 1, MarkOpStart: 11, MarkFenced: 21, MarkPropose: 31, MarkApplyStart: 131,
		MarkApplyEnd: 141, MarkHooksEnd: 146, MarkReturned: 156, MarkReplied: 176}
	noApply := map[Mark]int64{MarkReceived: 1, MarkOpStart: 11, MarkFenced: 21, MarkPropose: 31, MarkReturned: 156, MarkReplied: 176}
	refused := map[Mark]int64{MarkReceived: 1, MarkReplied: 9}
	for _, tc := range []struct {
		name string
		at   map[Mark]int64
		want string
	}{
		{"full", full, "decode=10 queue=10 entry=10 commit=100 apply=10 hooks=5 wake=10 reply=20 total=175"},
		{"apply not seen", noApply, "decode=10 queue=10 entry=10 commit=125 reply=20 total=175"},
		{"refused before the cell", refused, "reply=8 total=8"},
		{"nothing but received", map[Mark]int64{MarkReceived: 1}, ""},
	} {
		var got string
		for i, st := range traceAt(tc.at).Stages(nil) {
			if i > 0 {
				got += " "
			}
			got += st.Name + "=" + strconv.FormatInt(int64(st.Dur), 10)
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	var none *Trace
	none.Mark(MarkOpStart) // a nil trace records nothing, and does not panic
	if st := none.Stages(nil); len(st) != 0 {
		t.Fatalf("nil trace: %v", st)
	}
}

// TestApplyClock: an entry's apply times reach its proposer's trace while
// its slot holds them, and not once a later entry reused the slot.
func TestApplyClock(t *testing.T) {
	var a applyClock
	if a.on() {
		t.Fatal("timing with no traced proposal waiting")
	}
	a.waiting.Add(1)
	if !a.on() {
		t.Fatal("not timing while a traced proposal waits")
	}
	for _, tc := range []struct {
		name    string
		written []uint64 // entries recorded, in order
		read    uint64
		found   bool
	}{
		{"its own", []uint64{7}, 7, true},
		{"among others", []uint64{6, 7, 8}, 7, true},
		{"slot reused", []uint64{7, 7 + applyClockSlots}, 7, false},
		{"never applied here", []uint64{8}, 7, false},
		{"index 0 (a failed proposal)", []uint64{applyClockSlots}, 0, false},
	} {
		var c applyClock
		for _, idx := range tc.written {
			c.record(idx, int64(idx)*10, int64(idx)*10+1, int64(idx)*10+2)
		}
		tr := &Trace{}
		c.copyTo(tr, tc.read)
		got := tr.at[MarkApplyStart] != 0
		if got != tc.found {
			t.Errorf("%s: found %v, want %v", tc.name, got, tc.found)
			continue
		}
		if got && (tr.at[MarkApplyStart] != int64(tc.read)*10 || tr.at[MarkHooksEnd] != int64(tc.read)*10+2) {
			t.Errorf("%s: marks %v", tc.name, tr.at)
		}
	}
}

// TestTraceContext: the trace rides the operation's context.
func TestTraceContext(t *testing.T) {
	if traceOf(context.Background()) != nil {
		t.Fatal("a trace from a context without one")
	}
	tr := NewTrace()
	if traceOf(WithTrace(context.Background(), tr)) != tr {
		t.Fatal("the context's trace is not the one put in")
	}
	if st := tr.Stages(nil); len(st) != 0 {
		t.Fatalf("a trace only received: %v", st)
	}
}
