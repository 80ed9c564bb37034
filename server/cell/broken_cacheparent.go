//go:build lockd_broken_cacheparent

package cell

// brokenSkipsParent: a deliberately broken build the tests must catch (-tags
// lockd_broken_cacheparent): a create commits without invalidating the cachers of its parent, whose child count it changes. Never set in a normal build.
const brokenSkipsParent = true
