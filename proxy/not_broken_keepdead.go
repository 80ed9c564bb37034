//go:build !lockproxy_broken_keep_dead

package proxy

const brokenKeepDead = false
