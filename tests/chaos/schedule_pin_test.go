package chaos

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var updateSchedules = flag.Bool("update-schedules", false, "rewrite testdata/schedule-*.txt from the scheduler")

// pinnedSchedules are the runs whose fault schedules are pinned in
// testdata: SEED= must reproduce a schedule, whatever the code around it
// becomes. Each is a Config as Run receives it, and whether the machine
// gives network namespaces.
var pinnedSchedules = []struct {
	file       string
	cfg        Config
	partitions bool
}{
	{"schedule-seed231211-short-15s.txt", Config{Seed: 231211, Short: true, Duration: 15 * time.Second}, true},
	{"schedule-seed1-3m-nopartitions.txt", Config{Seed: 1, Duration: 3 * time.Minute, Rounds: 1}, false},
}

// TestSchedulePinned: the steps a seed gives (nominal start, kind, hold,
// pick, gap) are those in testdata, line for line.
func TestSchedulePinned(t *testing.T) {
	for _, tc := range pinnedSchedules {
		t.Run(tc.file, func(t *testing.T) {
			cfg := tc.cfg.withDefaults()
			rounds := cfg.Rounds
			if rounds <= 0 {
				rounds = min(1000, int(cfg.Duration/(10*time.Second))+1)
			}
			steps := Schedule(cfg.Seed, Timing{Election: cfg.electionMax(), Lease: cfg.Lease}, tc.partitions, rounds)
			got := scheduleTranscript(steps)
			path := filepath.Join("testdata", tc.file)
			if *updateSchedules {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("schedule of seed %d changed:\n--- got\n%s--- want\n%s", cfg.Seed, got, want)
			}
		})
	}
}

// scheduleTranscript prints steps one a line: the nominal start (the holds
// and gaps before it, without the time heals take), then the step.
func scheduleTranscript(steps []Step) string {
	var b strings.Builder
	var at time.Duration
	for _, s := range steps {
		fmt.Fprintf(&b, "%9v  %-16s hold %-8v long %-5v pick %-20d gap %v\n",
			at.Round(time.Millisecond), s.Kind, s.Hold.Round(time.Millisecond), s.Long, s.Pick, s.Gap.Round(time.Millisecond))
		at += s.Hold + s.Gap
	}
	return b.String()
}

// TestRunSchedulePinned: the schedule Run computes from its Config
// (scheduleFor) is the pinned one.
func TestRunSchedulePinned(t *testing.T) {
	for _, tc := range pinnedSchedules {
		want, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := scheduleTranscript(scheduleFor(tc.cfg.withDefaults(), tc.partitions)); got != string(want) {
			t.Errorf("%s: Run's schedule is not the pinned one:\n--- got\n%s--- want\n%s", tc.file, got, want)
		}
	}
}
