//go:build !lockd_broken_freegrants

package httpapi

// brokenFreeGrants is off in every normal build (broken_freegrants.go).
const brokenFreeGrants = false
