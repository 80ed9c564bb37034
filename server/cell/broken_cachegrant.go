//go:build lockd_broken_cachegrant

package cell

// brokenUnrecordedGrant: a deliberately broken build the tests must catch
// (-tags lockd_broken_cachegrant): a cache grant is committed without its
// node, as before grants were recorded, so a new leader fences the whole
// cell for every caching session (the fail-over regression of finding
// 11). Never set in a normal build.
const brokenUnrecordedGrant = true
