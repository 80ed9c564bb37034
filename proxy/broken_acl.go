//go:build lockproxy_broken_acl

package proxy

// brokenACL serves any token from the shared cache: a deliberately broken
// build (-tags lockproxy_broken_acl) that TestTenantsACLsAndQuotas must
// catch. Never set in a normal build.
const brokenACL = true
