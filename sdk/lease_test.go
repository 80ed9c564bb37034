package sdk

import (
	"testing"
	"time"
)

func TestLeaseClockStep(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lease, grace := 10*time.Second, 45*time.Second
	expiry := t0.Add(lease - DriftMargin(lease))
	tests := []struct {
		name     string
		jeopardy time.Time
		now      time.Time
		want     leaseStep
		wantNext time.Time
		wantSafe bool
	}{
		{"certain", time.Time{}, t0.Add(time.Second), leaseKeep, expiry, false},
		{"local lease runs out", time.Time{}, expiry, leaseJeopardy, expiry.Add(grace), false},
		{"within grace", expiry, expiry.Add(time.Second), leaseKeep, expiry.Add(grace), false},
		{"grace runs out", expiry, expiry.Add(grace), leaseExpired, time.Time{}, false},
		{"confirmed again in jeopardy", t0.Add(-time.Second), t0.Add(time.Second), leaseKeep, t0.Add(-time.Second).Add(grace), true},
	}
	for _, tc := range tests {
		lc := leaseClock{lastConfirmedSend: t0, lease: lease, grace: grace, jeopardySince: tc.jeopardy}
		step, next := lc.step(tc.now)
		if step != tc.want || !next.Equal(tc.wantNext) {
			t.Errorf("%s: step %v next %v, want %v %v", tc.name, step, next, tc.want, tc.wantNext)
		}
		if got := lc.safeAgain(tc.now); got != tc.wantSafe {
			t.Errorf("%s: safeAgain %v, want %v", tc.name, got, tc.wantSafe)
		}
	}
	if lc := (leaseClock{lastConfirmedSend: t0, lease: lease}); !lc.expiry().Before(t0.Add(lease)) {
		t.Error("local expiry not before the cell's")
	}
}
