//go:build lockd_broken_cachesettle

package cell

// brokenSettle: a deliberately broken build the tests must catch (-tags
// lockd_broken_cachesettle): a change whose proposal failed with an unknown outcome makes its node cacheable again at once. Never set in a normal build.
const brokenSettle = true
