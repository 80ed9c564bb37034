//go:build !lockd_broken_cacheparent

package cell

// brokenSkipsParent is off in every normal build (broken_cacheparent.go).
const brokenSkipsParent = false
