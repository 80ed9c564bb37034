//go:build !lockd_broken_fencecachers

package cell

const brokenFenceCachers = false
