//go:build !lockd_broken_grant_early

package chaos

const brokenGrantBuild = false
