package recent

import (
	"testing"
	"time"
)

func TestQuantileAndCount(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var w Window
	if v, n := w.Quantile(t0, time.Minute, 0.99); v != 0 || n != 0 {
		t.Fatalf("empty: %v %d", v, n)
	}
	for i := 1; i <= 100; i++ {
		w.Add(t0.Add(time.Duration(i)*time.Millisecond), float64(i))
	}
	now := t0.Add(time.Second)
	cases := []struct {
		span  time.Duration
		q     float64
		want  float64
		count int
	}{
		{time.Minute, 0.99, 99, 100},
		{time.Minute, 1, 100, 100},
		{time.Minute, 0.5, 50, 100},
		{time.Second - 50*time.Millisecond, 1, 100, 50}, // only the last 50
	}
	for _, c := range cases {
		v, n := w.Quantile(now, c.span, c.q)
		if v != c.want || n != c.count || w.Count(now, c.span) != c.count {
			t.Errorf("span %v q %v: %v over %d, want %v over %d", c.span, c.q, v, n, c.want, c.count)
		}
	}
	if n := w.Count(t0.Add(2*time.Minute), time.Minute); n != 0 {
		t.Errorf("a minute later: %d samples", n)
	}
}

func TestWindowIsBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var w Window
	for i := range MaxSamples + 500 {
		w.Add(t0.Add(time.Duration(i)*time.Microsecond), float64(i))
	}
	now := t0.Add(time.Second)
	if n := w.Count(now, time.Minute); n != MaxSamples {
		t.Fatalf("%d samples kept, want %d", n, MaxSamples)
	}
	if v, _ := w.Quantile(now, time.Minute, 0.0001); v != 500 {
		t.Fatalf("smallest kept %v, want 500 (the oldest went first)", v)
	}
}

func TestCounterCountsPastTheSampleBound(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var c Counter
	if c.Sum(t0, time.Minute) != 0 {
		t.Fatal("empty counter")
	}
	for i := range 50_000 {
		c.Add(t0.Add(time.Duration(i)*time.Millisecond), 1) // 50 s of 1 000/s
	}
	now := t0.Add(50 * time.Second)
	if n := c.Sum(now, time.Minute); n != 50_000 {
		t.Fatalf("%d counted over a minute, want 50000", n)
	}
	if n := c.Sum(now, 10*time.Second); n < 9_000 || n > 10_000 {
		t.Fatalf("%d counted over 10 s, want about 10000", n)
	}
	if n := c.Sum(now.Add(2*time.Minute), time.Minute); n != 0 {
		t.Fatalf("%d counted two minutes later", n)
	}
}

// Events stamped before the first one (racing writers) count, and never
// index outside the buckets; Reset forgets.
func TestCounterEarlyEventsAndReset(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var c Counter
	c.Add(t0, 1)
	c.Add(t0.Add(-1500*time.Millisecond), 1)
	c.Add(t0.Add(-time.Hour), 1)
	if n := c.Sum(t0, time.Minute); n != 3 {
		t.Fatalf("%d counted, want 3", n)
	}
	c.Reset()
	if n := c.Sum(t0, time.Minute); n != 0 {
		t.Fatalf("%d counted after Reset", n)
	}
	c.Add(t0.Add(time.Second), 2)
	if n := c.Sum(t0.Add(time.Second), time.Minute); n != 2 {
		t.Fatalf("%d counted after Reset and Add, want 2", n)
	}
}

func TestWindowOver(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var w Window
	for i := range 60 {
		v := 2.0
		if i%20 == 0 {
			v = 15
		}
		w.Add(t0.Add(time.Duration(i)*time.Second), v)
	}
	if over, all := w.Over(t0.Add(59*time.Second), time.Minute, 10); over != 3 || all != 60 {
		t.Fatalf("over %d of %d, want 3 of 60", over, all)
	}
}
