package stats

import (
	"slices"
	"testing"
	"time"
)

func durs(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", durs(7), 0.99, 7 * time.Millisecond},
		{"median of four is the second", durs(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 1..100", durs(hundred...), 0.99, 99 * time.Millisecond},
		{"p999 of 1..100 is the max", durs(hundred...), 0.999, 100 * time.Millisecond},
		{"p100", durs(1, 2, 3), 1, 3 * time.Millisecond},
		{"tiny q is the min", durs(1, 2, 3), 0.0001, 1 * time.Millisecond},
	} {
		if got := Percentile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("%s: Percentile(q=%v) = %v, want %v", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestRateAndPerSecond(t *testing.T) {
	for _, tc := range []struct {
		n       int
		elapsed time.Duration
		want    float64
	}{
		{0, time.Second, 0},
		{100, 2 * time.Second, 50},
		{3, 0, 0},
		{1, 500 * time.Millisecond, 2},
	} {
		if got := Rate(tc.n, tc.elapsed); got != tc.want {
			t.Errorf("Rate(%d, %v) = %v, want %v", tc.n, tc.elapsed, got, tc.want)
		}
	}
	got := PerSecond(durs(0, 999, 1000, 2500, 3000, 9000), 3*time.Second)
	want := []int{2, 1, 2} // at the end counts in the last second, past it in none
	if len(got) != len(want) {
		t.Fatalf("PerSecond = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("PerSecond = %v, want %v", got, want)
		}
	}
}

func TestSummarise(t *testing.T) {
	start := time.Unix(0, 0)
	r := NewRecorder(start)
	for i := 1; i <= 1000; i++ {
		d := time.Duration(i) * time.Millisecond
		r.Add(d, start.Add(time.Duration(i)*time.Millisecond))
	}
	r.Error()
	s := r.Summarise(2 * time.Second)
	if s.N != 1000 || s.Errors != 1 || s.Rate != 500 {
		t.Fatalf("n=%d errors=%d rate=%v", s.N, s.Errors, s.Rate)
	}
	if s.P50 != 500 || s.P99 != 990 || s.P999 != 999 || s.Max != 1000 || s.Mean != 500.5 {
		t.Fatalf("p50=%v p99=%v p999=%v max=%v mean=%v", s.P50, s.P99, s.P999, s.Max, s.Mean)
	}
	if len(s.CDF) != 100 || s.CDF[0].X != 1 || s.CDF[99].X != 1000 || s.CDF[99].Y != 1 {
		t.Fatalf("CDF ends %v … %v (%d points)", s.CDF[0], s.CDF[len(s.CDF)-1], len(s.CDF))
	}
	if len(s.PerSecond) != 2 || s.PerSecond[0] != 999 || s.PerSecond[1] != 1 {
		t.Fatalf("per second %v", s.PerSecond)
	}
}

// A case with one sample (a single restore, one failover) still has a CDF.
func TestCDFSmallSamples(t *testing.T) {
	for _, tc := range []struct {
		lat  []time.Duration
		want []Point
	}{
		{nil, nil},
		{durs(7), []Point{{7, 1}}},
		{durs(3, 9), []Point{{3, 0.5}, {9, 1}}},
	} {
		got := CDF(tc.lat, 100)
		if len(got) != len(tc.want) {
			t.Fatalf("CDF(%v) = %v, want %v", tc.lat, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("CDF(%v) = %v, want %v", tc.lat, got, tc.want)
			}
		}
	}
}

// A recorder that ran before and after its measured window (the proxy
// case's KeepAlives run while sessions open and while they close) reports
// the window alone: an even load draws an even series, not a flat line
// with every later completion piled into the last second.
func TestSummariseWindow(t *testing.T) {
	start := time.Unix(0, 0)
	r := NewRecorder(start)
	// 100 completions a second from 0 s to 20 s, each taking 2 ms.
	for i := 0; i < 2000; i++ {
		r.Add(2*time.Millisecond, start.Add(time.Duration(i)*10*time.Millisecond))
	}
	for _, tc := range []struct {
		name    string
		from    time.Duration
		elapsed time.Duration
		n       int
		series  []int
	}{
		{"middle", 6 * time.Second, 4 * time.Second, 401, []int{100, 100, 100, 101}},
		{"from the start", 0, 2 * time.Second, 201, []int{100, 101}},
		{"fraction of a second", 18 * time.Second, 1500 * time.Millisecond, 151, []int{100, 51}},
		{"after the samples", 30 * time.Second, 2 * time.Second, 0, nil},
	} {
		s := r.SummariseWindow(start.Add(tc.from), tc.elapsed)
		if s.N != tc.n || !slices.Equal(s.PerSecond, tc.series) {
			t.Errorf("%s: n=%d per second %v; want %d, %v", tc.name, s.N, s.PerSecond, tc.n, tc.series)
		}
	}
	all := r.Summarise(4 * time.Second)
	if all.N != 2000 || !slices.Equal(all.PerSecond, []int{100, 100, 100, 101}) {
		t.Errorf("Summarise: n=%d per second %v", all.N, all.PerSecond)
	}
}
