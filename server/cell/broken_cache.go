//go:build lockd_broken_cache || lockd_broken_cache_fence

package cell

// Deliberately broken builds that the cache tests must catch; never set
// in a normal build. -tags lockd_broken_cache: a change commits without
// invalidating its cachers. -tags lockd_broken_cache_fence: a new leader
// changes cacheable nodes without waiting for clients to learn of it.
const (
	brokenSkipsInvalidation = !brokenFenceOnly
	brokenSkipsFence        = brokenFenceOnly
)
