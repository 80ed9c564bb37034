//go:build lockd_broken_tenantmisses

package cachers

// brokenTenantMisses refuses cachers one session at a time only, so a
// tenant renews the write-stalling attack with a new session each time: a
// deliberately broken build (-tags lockd_broken_tenantmisses) that
// TestHostileCacherCannotBlockWrites must catch. Never set in a normal build.
const brokenTenantMisses = true
