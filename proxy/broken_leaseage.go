//go:build lockproxy_broken_lease_age

package proxy

// brokenLeaseAge is a deliberately broken build: the proxy tells its
// clients their lease was renewed when they asked, though its batches
// renew it only later (or never, if it cannot reach the cell).
const brokenLeaseAge = true
