//go:build lockd_broken_move_epoch

package fsm

// brokenMoveKeepsEpoch makes every token carry directory epoch 1, not
// its prefix's: after a move to a cell whose log indices are lower,
// tokens go down. A deliberately broken build (-tags lockd_broken_move_epoch) that
// the migration test's token check must catch. Never set in a normal
// build.
const brokenMoveKeepsEpoch = true
