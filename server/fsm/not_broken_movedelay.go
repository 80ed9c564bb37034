//go:build !lockd_broken_movedelay

package fsm

// The deliberately broken build (broken_movedelay.go) is off in every normal
// build.
const brokenMoveDelay = false
