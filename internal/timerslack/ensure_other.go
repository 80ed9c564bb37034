//go:build !linux

package timerslack

import "time"

// Ensure: only Linux has a per-thread timer slack to set.
func Ensure(want time.Duration, _ string) Report {
	r := Report{Want: want}
	if want > 0 {
		r.Note = "timer slack: not settable on this OS"
	}
	return r
}
