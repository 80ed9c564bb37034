//go:build !lockproxy_broken_lease_age

package proxy

const brokenLeaseAge = false
