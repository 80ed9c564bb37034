//go:build !lockproxy_broken_batchsplit

package proxy

const brokenBatchSplit = false
