//go:build lockproxy_broken_proxywatchquota

package proxy

// brokenProxyWatchQuota holds a tenant's waits through the proxy to the
// proxy's own cap only, not to the tenant's watch quota: a deliberately
// broken build (-tags lockproxy_broken_proxywatchquota) that
// TestHostileCredentials must catch (issue 22, hole 7). Never set in a
// normal build.
const brokenProxyWatchQuota = true
