//go:build lockd_broken_watchquota

package cell

// brokenWatchQuota holds a tenant's watch quota per session only, so
// many sessions multiply it: a deliberately broken build (-tags
// lockd_broken_watchquota) that TestTenantWatchQuotaAcrossSessions must
// catch (issue 22, hole 7). Never set in a normal build.
const brokenWatchQuota = true
