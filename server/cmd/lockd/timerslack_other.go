//go:build !linux

package main

import "time"

// ensureTimerSlack: only Linux has a per-thread timer slack to set.
func ensureTimerSlack(want time.Duration, _ string) timerSlackReport {
	r := timerSlackReport{Want: want}
	if want > 0 {
		r.Note = "timer slack: not settable on this OS"
	}
	return r
}
