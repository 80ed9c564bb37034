//go:build !lockd_broken_seal && lockd_broken_move_epoch

package fsm

const brokenSealKeepsEphemerals = false
