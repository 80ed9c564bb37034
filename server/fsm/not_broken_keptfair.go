//go:build !lockd_broken_keptfair

package fsm

// The deliberately broken build (broken_keptfair.go) is off in every
// normal build.
const brokenKeptFair = false
