package ctl

import (
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/sdk"
)

func TestFormatLease(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		st    sdk.SessionStats
		final bool
		want  []string
	}{
		{"confirmed", sdk.SessionStats{Cell: "demo", Session: 7, Epoch: 2, LastConfirmed: now.Add(-1500 * time.Millisecond), LeaseMargin: 8 * time.Second,
			KeepAlivesSent: 5, Failovers: 1}, false,
			[]string{"lease: cell=demo session=7 epoch=2", "margin=8s", "last_confirmed=1.5s ago", "failovers=1", "keepalives=5 failed=0"}},
		{"never confirmed, in jeopardy", sdk.SessionStats{Cell: "demo", Session: 8, InJeopardy: true, JeopardyEpisodes: 1, JeopardyTime: 2 * time.Second}, true,
			[]string{"lease (final):", "last_confirmed=never", "jeopardy=true episodes=1 jeopardy_time=2s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := formatLease(tc.st, now, tc.final)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
		})
	}
}

// TestLockVerbosePrintsLease: lockctl -v lock prints its session's lease
// figures on stderr when it ends; without -v, nothing.
func TestLockVerbosePrintsLease(t *testing.T) {
	f := newFakeServer(t)
	r := at(t, f, "-v", "lock", "/demo/v", "--", "true")
	if r.code != 0 || !strings.Contains(r.stderr, "lease (final): cell=demo session=") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	at(t, f, "lock", "/demo/v", "--", "true").ok(t)
}
