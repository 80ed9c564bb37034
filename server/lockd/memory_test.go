package lockd

import "testing"

func TestMemoryFor(t *testing.T) {
	for _, tc := range []struct {
		name        string
		limitMB, gc int
		wantLimit   int64
		wantGC      int
		wantErr     bool
	}{
		{name: "defaults", wantLimit: DefaultMemoryLimitMB << 20, wantGC: DefaultGCPercent},
		{name: "set", limitMB: 512, gc: 200, wantLimit: 512 << 20, wantGC: 200},
		{name: "gc off", limitMB: 300, gc: -1, wantLimit: 300 << 20, wantGC: -1},
		{name: "negative limit", limitMB: -1, wantErr: true},
		{name: "limit too big", limitMB: maxMemoryLimitMB + 1, wantErr: true},
		{name: "gc too low", gc: -2, wantErr: true},
		{name: "gc too high", gc: maxGCPercent + 1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := memoryFor(Config{MemoryLimitMB: tc.limitMB, GCPercent: tc.gc})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && (m.limitBytes != tc.wantLimit || m.gcPercent != tc.wantGC) {
				t.Fatalf("got %+v, want limit %d gc %d", m, tc.wantLimit, tc.wantGC)
			}
		})
	}
}
