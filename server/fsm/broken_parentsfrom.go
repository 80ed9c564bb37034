//go:build lockd_broken_parentsfrom

package fsm

// brokenParentsFrom lets make_parents create ancestors outside the
// caller's grant: a deliberately broken build (-tags
// lockd_broken_parentsfrom) that TestMakeParentsStaysInGrant and
// TestHostileCredentials must catch (issue 22, hole 10). Never set in a
// normal build.
const brokenParentsFrom = true
