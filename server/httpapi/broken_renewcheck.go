//go:build lockd_broken_renewcheck

package httpapi

// brokenRenewCheck renews the sessions of a tenant whose tokens were
// revoked: a deliberately broken build (-tags lockd_broken_renewcheck)
// that TestHostileCredentials must catch (issue 22, hole 4). Never set in
// a normal build.
const brokenRenewCheck = true
