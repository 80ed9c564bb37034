//go:build !lockd_broken_check

package fsm

// The deliberately broken build (broken_check.go) is off in every normal
// build.
const brokenCheckAnyGranted = false
