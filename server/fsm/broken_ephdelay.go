//go:build lockd_broken_ephdelay

package fsm

// brokenEphDelay lets an ephemeral node made at a deleted lock
// directory's path take the delay kept for it, and its sequence counter,
// and drops both when that node goes (issue 23, attack review 3): a
// deliberately broken build (-tags lockd_broken_ephdelay) that
// TestKeptDelayOutlivesEphemeralAtItsPath and
// TestKeptDelayOutlivesEphemeralNode must catch. Never set in a normal
// build.
const brokenEphDelay = true
