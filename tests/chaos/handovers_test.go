package chaos

import "testing"

func TestCounterSumAcrossRestarts(t *testing.T) {
	var c counterSum
	for _, s := range []struct {
		process string
		v, want float64
	}{
		{"a", 2, 2}, {"b", 1, 3}, {"a", 5, 6}, {"a", 5, 6},
		{"a", 1, 7}, // restarted: its 1 since counts whole
		{"b", 4, 10},
	} {
		c.observe(s.process, s.v)
		if c.total != s.want {
			t.Fatalf("after %s=%v: total %v, want %v", s.process, s.v, c.total, s.want)
		}
	}
}

func TestMetricSum(t *testing.T) {
	b := []byte("# HELP lockd_handovers_total x\n# TYPE lockd_handovers_total counter\n" +
		"lockd_handovers_total{cell=\"demo\"} 3\nlockd_handovers_total{cell=\"side\"} 2\n" +
		"lockd_handovers_failed_total{cell=\"demo\"} 1\nlockd_handovers_totalx 9\n")
	if got := metricSum(b, "lockd_handovers_total"); got != 5 {
		t.Fatalf("sum %v, want 5", got)
	}
	if got := metricSum(b, "lockd_handovers_failed_total"); got != 1 {
		t.Fatalf("failed sum %v, want 1", got)
	}
}
