//go:build lockd_broken_freegrants

package httpapi

// brokenFreeGrants: a deliberately broken build the tests must catch
// (-tags lockd_broken_freegrants): cache grants, committed entries, are
// not metered by the reader's write quota. Never set in a normal build.
const brokenFreeGrants = true
