//go:build !lockd_broken_restore_epoch

package dirfsm

// The deliberately broken build (broken_restore.go) is off in every
// normal build.
const brokenRestoreKeepsEpoch = false
