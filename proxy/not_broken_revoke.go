//go:build !lockproxy_broken_revoke

package proxy

const brokenRevoke = false
