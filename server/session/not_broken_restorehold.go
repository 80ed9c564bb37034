//go:build !lockd_broken_restorehold

package session

// brokenRestoreNoHold is off in every normal build (broken_restorehold.go).
const brokenRestoreNoHold = false
