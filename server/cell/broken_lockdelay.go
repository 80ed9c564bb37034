//go:build lockd_broken_lockdelay

package cell

// A deliberately broken build that the lock-delay test must catch; never
// set in a normal build. -tags lockd_broken_lockdelay: a new leader ends
// every lock-delay it inherits at once instead of timing it.
const brokenLockDelayLostOnFailover = true
