//go:build !lockproxy_broken_awaitbatch

package proxy

const brokenAwaitBatch = false
