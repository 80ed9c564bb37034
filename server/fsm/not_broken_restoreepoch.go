//go:build !lockd_broken_restore_leaderepoch

package fsm

// The deliberately broken build (broken_restoreepoch.go) is off in every
// normal build.
const brokenRestoreKeepsLeaderEpoch = false
