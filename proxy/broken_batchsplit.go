//go:build lockproxy_broken_batchsplit

package proxy

// brokenBatchSplit: a deliberately broken build (-tags lockproxy_broken_batchsplit):
// the proxy's pre-fix batches: a KeepAlive's claim rides unverified and unbounded, batches are never cut, a failed batch call is retried without bound. TestHostileProxyBatchWedge must catch it. Never set in a normal build.
const brokenBatchSplit = true
