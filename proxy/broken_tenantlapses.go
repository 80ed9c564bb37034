//go:build lockproxy_broken_tenantlapses

package proxy

// brokenTenantLapses refuses cache grants one client session at a time
// only, so a tenant renews the write-stalling attack through the proxy
// with a new session each time: a deliberately broken build (-tags
// lockproxy_broken_tenantlapses) that TestHostileCacherCannotBlockWrites/
// through_a_proxy must catch. Never set in a normal build.
const brokenTenantLapses = true
