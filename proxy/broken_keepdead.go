//go:build lockproxy_broken_keep_dead

package proxy

// brokenKeepDead is a deliberately broken build for the takeover test:
// the proxy renews every session it knows as if its client had just
// spoken, so a dead client's locks are never freed.
const brokenKeepDead = true
