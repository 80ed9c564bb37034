//go:build lockd_broken_check

package fsm

// brokenCheckAnyGranted makes the token check answer valid for any token
// up to the current holder's, as if a token once granted stayed good: a
// deliberately broken build (-tags lockd_broken_check) that the token
// check test must catch. Never set in a normal build.
const brokenCheckAnyGranted = true
