//go:build !lockd_broken_cachesettle

package cell

// brokenSettle is off in every normal build (broken_cachesettle.go).
const brokenSettle = false
