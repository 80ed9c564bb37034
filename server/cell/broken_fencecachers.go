//go:build lockd_broken_fencecachers

package cell

// brokenFenceCachers records cachers while a new leader's fence runs: a
// deliberately broken build (-tags lockd_broken_fencecachers). Never set
// in a normal build.
const brokenFenceCachers = true
