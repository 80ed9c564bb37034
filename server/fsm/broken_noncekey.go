//go:build lockd_broken_noncekey

package fsm

// brokenNonceKey remembers session opens by nonce alone, across tenants:
// a deliberately broken build (-tags lockd_broken_noncekey) that
// TestOpenNonceIsPerTenant and TestHostileCredentials must catch (issue
// 22, hole 10). Never set in a normal build.
const brokenNonceKey = true
