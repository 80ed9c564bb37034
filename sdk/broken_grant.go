//go:build lockd_broken_grant_early

package sdk

// brokenGrantEarly makes Lock report a grant as soon as its node is
// created, before its predecessor is gone: a deliberately broken build
// (-tags lockd_broken_grant_early) that the chaos suite's checkers must
// catch. Never set in a normal build.
const brokenGrantEarly = true
