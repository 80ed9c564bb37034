//go:build lockd_broken_abortdelay

package fsm

// brokenAbortDelay makes an aborted move hand a lock held at its seal to
// a new holder at once: the unseal clears the delays the seal recorded
// for the new cell without starting them on the old one (issue 23,
// attack review 3). A deliberately broken build (-tags
// lockd_broken_abortdelay) that TestAbortedMoveStartsDelays and
// TestAbortedMoveKeepsLocksDelayed must catch. Never set in a normal
// build.
const brokenAbortDelay = true
