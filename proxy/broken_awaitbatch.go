//go:build lockproxy_broken_awaitbatch

package proxy

// brokenAwaitBatch answers a client's KeepAlive at its deadline even if
// no batch carrying it was confirmed yet (its lease then counts from its
// previous KeepAlive): a deliberately broken build (-tags
// lockproxy_broken_awaitbatch) on which TestProxyKillKeepsLocks enters
// jeopardy with a short lease. Never set in a normal build.
const brokenAwaitBatch = true
