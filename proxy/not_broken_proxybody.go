//go:build !lockproxy_broken_proxybody

package proxy

const brokenProxyBody = false
