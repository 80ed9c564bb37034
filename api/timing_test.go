package api

import (
	"errors"
	"testing"
)

func TestParseCellTiming(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want CellTiming
		bad  bool
	}{
		{"", CellTiming{}, false},
		{"heartbeat=500ms,election=5s,lease=30s,keepalive=10s,grace=2m", CellTiming{500, 5000, 30000, 10000, 120000}, false},
		{"lease=30s", CellTiming{LeaseMS: 30000}, false},
		{"election=1s,heartbeat=500ms", CellTiming{}, true}, // under 5 heartbeats
		{"election=5s,lease=20s", CellTiming{}, true},       // under 3 of the longest elections
		{"lease=30s,keepalive=11s", CellTiming{}, true},     // over a third of the lease
		{"lease=30s,grace=10s", CellTiming{}, true},         // grace under the lease
		{"lease=10m", CellTiming{}, true},                   // over MaxLease
		{"beat=1s", CellTiming{}, true},
		{"lease=1.5ms", CellTiming{}, true},
		{"lease", CellTiming{}, true},
	} {
		got, err := ParseCellTiming(tc.in)
		if tc.bad {
			if err == nil || !errors.Is(err, ErrBadRequest) {
				t.Errorf("%q: %+v %v, want bad_request", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.in, got, err, tc.want)
		}
		if again, err := ParseCellTiming(got.String()); err != nil || again != got {
			t.Errorf("%q: String %q parses to %+v %v", tc.in, got.String(), again, err)
		}
	}
	if Ticks(5000, 100, 10) != 50 || Ticks(450, 100, 1) != 5 || Ticks(0, 100, 10) != 10 {
		t.Error("Ticks")
	}
}
