//go:build !lockd_broken_abortdelay

package fsm

// The deliberately broken build (broken_abortdelay.go) is off in every
// normal build.
const brokenAbortDelay = false
