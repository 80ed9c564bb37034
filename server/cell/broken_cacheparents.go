//go:build lockd_broken_cacheparents

package cell

// brokenCachesParents: a deliberately broken build the tests must catch (-tags
// lockd_broken_cacheparents): a node with children is granted to caches. Never set in a normal build.
const brokenCachesParents = true
