//go:build !lockd_broken_ephdelay

package fsm

// The deliberately broken build (broken_ephdelay.go) is off in every
// normal build.
const brokenEphDelay = false
