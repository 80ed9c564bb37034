//go:build !lockd_broken_cachegrant

package cell

// brokenUnrecordedGrant is off in every normal build (broken_cachegrant.go).
const brokenUnrecordedGrant = false
