//go:build lockd_broken_refreshgap

package httpapi

// brokenRefreshGap lets directory reads for unknown tokens run back to
// back: a deliberately broken build (-tags lockd_broken_refreshgap) that
// TestRefresherCoalesces must catch (issue 22, hole 7). Never set in a
// normal build.
const brokenRefreshGap = true
