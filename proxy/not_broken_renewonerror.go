//go:build !lockproxy_broken_renewonerror

package proxy

const brokenRenewOnError = false
