package check

import (
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

const semLock = "/demo/chaos/sem"

// TestSemaphoreChecker: three permits. Handoffs, three holders at once
// and overlaps within the margin pass; a fourth holder live beside three
// for longer than the margin fails once per episode, and a token not
// above one released before it was asked for fails.
func TestSemaphoreChecker(t *testing.T) {
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	iv := func(w string, start, end int) Interval {
		return Interval{Lock: semLock, Node: semLock + "/p-" + w, Worker: w, Mode: api.LockPermit, Start: ms(start), End: ms(end)}
	}
	permits := map[string]int{semLock: 3}
	good := []Interval{
		iv("a", 0, 100), iv("b", 10, 200), iv("c", 20, 300),
		iv("d", 100, 250),   // a ended at 100: touching is no overlap
		iv("e", 197, 400),   // 3 ms beside b, c and d: within the 5 ms margin
		iv("f", 1000, 1100), // a lone holder later
		{Lock: "/demo/other", Mode: api.LockPermit, Start: 0, End: ms(5000)}, // another lock: not this one's
		{Lock: semLock, Mode: api.LockExclusive, Start: 0, End: ms(5000)},    // not a permit interval
	}
	gs := []PermitGrant{
		{Lock: semLock, Node: "p-1", Worker: "a", Token: 10, Asked: ms(0), Released: ms(101)},
		{Lock: semLock, Node: "p-2", Worker: "b", Token: 11, Asked: ms(5), Released: ms(201)},
		{Lock: semLock, Node: "p-4", Worker: "d", Token: 13, Asked: ms(50), Released: ms(251)},
		{Lock: semLock, Node: "p-3", Worker: "c", Token: 12, Asked: ms(6), Released: 0}, // release not known
		{Lock: semLock, Node: "p-5", Worker: "e", Token: 14, Asked: ms(190)},
	}
	cases := []struct {
		name   string
		ivs    []Interval
		grants []PermitGrant
		want   int
	}{
		{"good", good, gs, 0},
		{"a fourth holder", append(append([]Interval(nil), good...), iv("g", 150, 180)), gs, 1},
		{"two episodes", append(append([]Interval(nil), good...), iv("g", 150, 180), iv("h", 240, 260)), gs, 2},
		{"token below a released one", good, append(append([]PermitGrant(nil), gs...),
			PermitGrant{Lock: semLock, Node: "p-6", Worker: "g", Token: 9, Asked: ms(300)}), 1},
		{"token twice", good, append(append([]PermitGrant(nil), gs...),
			PermitGrant{Lock: semLock, Node: "p-7", Worker: "h", Token: 14, Asked: ms(10)}), 1},
	}
	for _, tc := range cases {
		n, vs := CheckSemaphores(tc.ivs, tc.grants, permits, ms(5))
		if n == 0 {
			t.Fatalf("%s: nothing checked", tc.name)
		}
		wantViolations(t, tc.name, vs, tc.want)
	}
}
