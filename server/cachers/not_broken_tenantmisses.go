//go:build !lockd_broken_tenantmisses

package cachers

const brokenTenantMisses = false
