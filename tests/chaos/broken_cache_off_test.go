//go:build !lockd_broken_cache

package chaos

const brokenCacheBuild = false
