//go:build !lockd_broken_grant_early

package sdk

// brokenGrantEarly is false in every normal build (see broken_grant.go).
const brokenGrantEarly = false
