//go:build lockd_broken_cachewindow

package cell

// A deliberately broken build for TestHostileCacherCannotBlockWrites:
// -tags lockd_broken_cachewindow ignores an invalidation's deadline, so a
// write waits for a cacher that renews its lease but never acknowledges
// until that lease runs out (never, while it renews). Never set it in a
// real build.
const brokenCacheWindow = true
