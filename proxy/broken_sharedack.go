//go:build lockproxy_broken_shared_ack

package proxy

// brokenSharedAck is a deliberately broken build for the cache checks:
// the proxy acknowledges the leader's invalidation of its shared cache at
// once, without waiting for the clients it served the value to, so a
// write may commit while a client still serves the old value.
const brokenSharedAck = true
