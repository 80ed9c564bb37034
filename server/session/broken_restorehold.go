//go:build lockd_broken_restorehold

package session

// brokenRestoreNoHold: a deliberately broken build the tests must catch
// (-tags lockd_broken_restorehold): a restored cell's first leader holds
// nothing for the sessions its backup never had. Never set in a normal
// build.
const brokenRestoreNoHold = true
