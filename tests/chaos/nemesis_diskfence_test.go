package chaos

import (
	"testing"
	"time"
)

// TestDiskFence: the fence of a disk fault on every replica runs from the
// fault to one cache window after the first commit once the last slow
// fsync returned. The first row is make test's TestChaosShort (seed 1)
// expire-in-flight: the side cell's new leader started at 2m6.605s, so
// its own fence ended by 2m8.105s, inside the recorded one.
func TestDiskFence(t *testing.T) {
	ms := func(m int64) time.Duration { return time.Duration(m) * time.Millisecond }
	window := 1500 * time.Millisecond
	for _, tc := range []struct {
		name                            string
		at, healed, slow, first, wantTo time.Duration
		covers                          time.Duration // a leader's fence end it must reach
	}{
		{"seed 1 expire-in-flight", ms(121_300), ms(125_520), ms(1500), ms(127_050), ms(128_550), ms(128_105)},
		{"first commit as the disks heal", ms(10_000), ms(14_000), ms(1500), ms(15_500), ms(17_000), ms(17_000)},
		{"a commit before the last slow fsync returned", ms(10_000), ms(14_000), ms(1500), ms(14_200), ms(17_000), ms(17_000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := diskFence("expire-in-flight", tc.at, tc.healed, tc.slow, tc.first, window)
			if f.Start != tc.at || f.End != tc.wantTo {
				t.Fatalf("fence %v–%v, want %v–%v", f.Start, f.End, tc.at, tc.wantTo)
			}
			if f.End < tc.covers {
				t.Fatalf("fence ends %v, before %v", f.End, tc.covers)
			}
		})
	}
}
