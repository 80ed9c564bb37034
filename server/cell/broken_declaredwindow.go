//go:build lockd_broken_declaredwindow

package cell

// brokenDeclaredWindow grants cacheable reads to clients that do not
// declare a cache window within the session's (an SDK or lockproxy built
// before short grants serves 9 s; the leader waits 1.5 s): a
// deliberately broken build (-tags lockd_broken_declaredwindow) that
// TestUndeclaredCacheWindowServedUncached must catch. Never set in a
// normal build.
const brokenDeclaredWindow = true
