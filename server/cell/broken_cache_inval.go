//go:build lockd_broken_cache && !lockd_broken_cache_fence

package cell

const brokenFenceOnly = false
