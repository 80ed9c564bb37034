//go:build !lockd_broken_lockdelay

package cell

// The deliberately broken build (broken_lockdelay.go) is off in every
// normal build.
const brokenLockDelayLostOnFailover = false
