//go:build lockd_broken_acl

package httpapi

// brokenACL grants every authenticated tenant every role: a deliberately
// broken build (-tags lockd_broken_acl) that TestTenantsACLsAndQuotas
// must catch. Never set in a normal build.
const brokenACL = true
