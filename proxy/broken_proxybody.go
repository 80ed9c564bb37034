//go:build lockproxy_broken_proxybody

package proxy

// brokenProxyBody reads a request's whole body before the client is known
// (as fasthttp does without streaming, here without a bound at all): a
// deliberately broken build (-tags lockproxy_broken_proxybody) that
// TestHostileCredentials/bodies must catch. Never set in a normal build.
const brokenProxyBody = true
