//go:build !lockproxy_broken_watchkey

package proxy

const brokenWatchKey = false
