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

// TestTimingScaledToTheCell: a session's KeepAlive interval and grace
// follow its cell's timing, and otherwise its lease.
func TestTimingScaledToTheCell(t *testing.T) {
	for _, tc := range []struct {
		name             string
		cfg              Config
		lease            time.Duration
		keepAliveMS      int64
		graceMS          int64
		wantWait, wantGr time.Duration
	}{
		{"defaults", Config{}, 12 * time.Second, 0, 0, 4 * time.Second, 45 * time.Second},
		{"a short lease keeps the default grace", Config{}, 3 * time.Second, 0, 0, time.Second, 45 * time.Second},
		{"a longer lease scales the grace", Config{}, 30 * time.Second, 0, 0, 10 * time.Second, 112500 * time.Millisecond},
		{"the cell's own timing", Config{}, 30 * time.Second, 5000, 120_000, 5 * time.Second, 2 * time.Minute},
		{"the application's grace wins", Config{Grace: time.Minute}, 30 * time.Second, 0, 120_000, 10 * time.Second, time.Minute},
		{"never over a third of the lease", Config{}, 12 * time.Second, 9000, 0, 4 * time.Second, 45 * time.Second},
	} {
		if got := keepAliveWait(tc.lease, tc.keepAliveMS); got != tc.wantWait {
			t.Errorf("%s: wait %v, want %v", tc.name, got, tc.wantWait)
		}
		if got := tc.cfg.graceFor(tc.lease, tc.graceMS); got != tc.wantGr {
			t.Errorf("%s: grace %v, want %v", tc.name, got, tc.wantGr)
		}
	}
}
