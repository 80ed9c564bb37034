//go:build !lockd_broken_cachewindow

package cell

// The deliberately broken build (broken_cachewindow.go) is off in every
// normal build.
const brokenCacheWindow = false
