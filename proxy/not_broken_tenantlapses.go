//go:build !lockproxy_broken_tenantlapses

package proxy

const brokenTenantLapses = false
