//go:build lockproxy_broken_watchkey

package proxy

// brokenWatchKey: a deliberately broken build (-tags lockproxy_broken_watchkey):
// the proxy keys its clients' watches by (path, kind, since) again, one entry each. TestHostileProxyWatchFlood must catch it. Never set in a normal build.
const brokenWatchKey = true
