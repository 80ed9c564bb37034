//go:build !lockd_broken_stagegen

package fsm

// The deliberately broken build (broken_stagegen.go) is off in every normal
// build.
const brokenStageGen = false
