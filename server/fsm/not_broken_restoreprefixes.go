//go:build !lockd_broken_restoreprefixes

package fsm

// The deliberately broken build (broken_restoreprefixes.go) is off in
// every normal build.
const brokenRestoreKeepsPrefixes = false
