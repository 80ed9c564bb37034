//go:build !lockd_broken_cache && !lockd_broken_cache_fence

package cell

// The deliberately broken builds (broken_cache.go) are off in every
// normal build.
const (
	brokenSkipsInvalidation = false
	brokenSkipsFence        = false
)
