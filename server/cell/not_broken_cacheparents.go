//go:build !lockd_broken_cacheparents

package cell

// brokenCachesParents is off in every normal build (broken_cacheparents.go).
const brokenCachesParents = false
