//go:build lockd_broken_restoreprefixes

package fsm

// brokenRestoreKeepsPrefixes makes the first leader_start after a restore
// keep every prefix of the backup, also those the directory moved to
// another cell since: the restored cell then serves them again beside
// their new cell. A deliberately broken build (-tags
// lockd_broken_restoreprefixes) that TestRestoreTakesDirectoryState must
// catch. Never set in a normal build.
const brokenRestoreKeepsPrefixes = true
