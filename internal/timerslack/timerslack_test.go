package timerslack

import (
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		us      int
		want    time.Duration
		wantErr bool
	}{
		{name: "default", us: 0, want: time.Millisecond},
		{name: "the OS's own", us: -1, want: 0},
		{name: "set", us: 250, want: 250 * time.Microsecond},
		{name: "largest", us: MaxUS, want: 10 * time.Millisecond},
		{name: "too low", us: -2, wantErr: true},
		{name: "too high", us: MaxUS + 1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := For(tc.us)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
