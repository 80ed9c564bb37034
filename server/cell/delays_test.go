package cell

import (
	"testing"
	"time"

	"github.com/lockservice/lockd/server/fsm"
)

func TestInheritedEnd(t *testing.T) {
	start := time.Unix(1000, 0)
	applied := start.Add(-3 * time.Second)
	l := fsm.LockDelay{Dir: "/demo/l", Since: 40, MS: 10_000}
	for _, tc := range []struct {
		name    string
		applied appliedRelease
		want    time.Time
	}{
		{"applied the release: timed from that apply", appliedRelease{since: 40, at: applied}, applied.Add(10 * time.Second)},
		{"never applied it: a full delay from its start", appliedRelease{}, start.Add(10 * time.Second)},
		{"applied an earlier release only", appliedRelease{since: 31, at: applied}, start.Add(10 * time.Second)},
	} {
		if got := inheritedEnd(l, tc.applied, start); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got.Sub(start), tc.want.Sub(start))
		}
	}
}
