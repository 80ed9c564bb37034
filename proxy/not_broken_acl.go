//go:build !lockproxy_broken_acl

package proxy

const brokenACL = false
