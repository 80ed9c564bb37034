//go:build !lockd_broken_cachewindow

package chaos

const brokenCacheWindowBuild = false
