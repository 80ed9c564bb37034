package cell

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
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

// A leader ends a lock-delay a full delay after its own apply of the
// release, not a moment before; a deposed one ends nothing; a new leader
// ends a delay it inherited a full delay after its own apply of the
// release, or after its start if it never applied it (restored from a
// snapshot). On the synctest bubble's clock: the 10 s pass without
// waiting. Fails on mutant lockd_broken_lockdelay (inherited delays ended
// at once).
func TestLockDelaysEndOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan string, 8)
		d := newLockDelays(slog.Default(), func(_ context.Context, dir string, since uint64) error {
			ended <- fmt.Sprintf("%s@%d", dir, since)
			return nil
		})
		defer d.wait()
		defer d.stop()
		var start time.Time
		endedNow := func(want ...string) {
			t.Helper()
			synctest.Wait()
			var got []string
			for len(ended) > 0 {
				got = append(got, <-ended)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("at +%v: ended %v, want %v", time.Since(start), got, want)
			}
		}
		start = time.Now()
		d.start(1, nil, start)
		d.released("/demo/l", 40, 10_000, time.Now())
		time.Sleep(10*time.Second - time.Millisecond)
		endedNow()
		time.Sleep(time.Millisecond)
		endedNow("/demo/l@40")

		// Deposed: nothing ends; the next leader times what it inherits.
		d.released("/demo/m", 41, 10_000, time.Now())
		time.Sleep(4 * time.Second)
		d.stop()
		time.Sleep(10 * time.Second)
		endedNow()
		inherited := []fsm.LockDelay{{Dir: "/demo/m", Since: 41, MS: 10_000}, {Dir: "/demo/n", Since: 42, MS: 10_000}}
		d.start(2, inherited, time.Now()) // applied /demo/m 14 s ago, never /demo/n
		endedNow("/demo/m@41")
		time.Sleep(10*time.Second - time.Millisecond)
		endedNow()
		time.Sleep(time.Millisecond)
		endedNow("/demo/n@42")
	})
}
