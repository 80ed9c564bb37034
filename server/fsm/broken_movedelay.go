//go:build lockd_broken_movedelay

package fsm

// brokenMoveDelay makes a move hand a lock held at the seal to a new
// holder at once: the seal hands the new cell no lock-delay for it, and
// the new cell starts none (issue 23, finding 7), nor keeps the delays
// (and sequence counters) of lock directories deleted in their delay
// that moved with the prefix (findings 7 and 8 joined). A deliberately
// broken build (-tags lockd_broken_movedelay) that TestMoveKeepsLocksDelayed,
// TestMoveCarriesLockDelays and TestMoveCarriesKeptDelays must catch.
// Never set in a normal build.
const brokenMoveDelay = true
