//go:build !linux

package main

import "time"

// timerSlackReport is what ensureTimerSlack found and did, for the log.
type timerSlackReport struct {
	Want, Now  time.Duration
	ReExecuted bool
	Note       string
}

// ensureTimerSlack: only Linux has a per-thread timer slack to set.
func ensureTimerSlack(want time.Duration, _ string) timerSlackReport {
	r := timerSlackReport{Want: want}
	if want > 0 {
		r.Note = "timer slack: not settable on this OS"
	}
	return r
}
