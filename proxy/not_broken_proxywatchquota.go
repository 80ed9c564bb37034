//go:build !lockproxy_broken_proxywatchquota

package proxy

const brokenProxyWatchQuota = false
