//go:build !lockd_broken_seal && !lockd_broken_move_epoch

package fsm

// The deliberately broken builds (broken_seal.go, broken_epoch.go) are
// off in every normal build.
const (
	brokenSealKeepsEphemerals = false
	brokenMoveKeepsEpoch      = false
)
