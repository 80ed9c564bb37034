//go:build !lockproxy_broken_shared_ack

package proxy

const brokenSharedAck = false
