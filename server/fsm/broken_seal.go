//go:build lockd_broken_seal

package fsm

// brokenSealKeepsEphemerals makes a seal leave the prefix's ephemeral
// (lock) nodes in place and fire no watch: their holders keep their
// locks on the old cell while the new one grants. A deliberately broken build (-tags
// lockd_broken_seal) that the migration test's mutual-exclusion check
// must catch. Never set in a normal build.
const brokenSealKeepsEphemerals = true
