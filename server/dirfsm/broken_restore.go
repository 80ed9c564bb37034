//go:build lockd_broken_restore_epoch

package dirfsm

// brokenRestoreKeepsEpoch makes a restore plan leave its cell's prefixes
// at their epoch: the restored cell then issues again the tokens the lost
// one issued after the backup. A deliberately broken build (-tags
// lockd_broken_restore_epoch) that the restore test's token check must
// catch. Never set in a normal build.
const brokenRestoreKeepsEpoch = true
