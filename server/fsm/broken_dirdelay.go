//go:build lockd_broken_dirdelay

package fsm

// brokenDirDelay drops a lock directory's lock-delay, and its sequence
// counter, when the empty directory is deleted: a deliberately broken
// build (-tags lockd_broken_dirdelay) that TestLockDelayOutlivesItsDirectory
// and TestLockDelaySurvivesDirectoryDelete must catch. Never set in a
// normal build.
const brokenDirDelay = true
