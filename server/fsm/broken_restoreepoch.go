//go:build lockd_broken_restore_leaderepoch

package fsm

// brokenRestoreKeepsLeaderEpoch makes the first leader_start after a
// restore ignore the plan's floor: the restored cell's leader epochs go
// on from the backup's, equal to or below those clients saw before. A
// deliberately broken build (-tags lockd_broken_restore_leaderepoch) that
// TestRestoreTakesDirectoryState must catch. Never set in a normal build.
const brokenRestoreKeepsLeaderEpoch = true
