//go:build lockproxy_broken_revoke

package proxy

// brokenRevoke: a deliberately broken build (-tags lockproxy_broken_revoke):
// the proxy's view of the tenants is not re-read periodically (only for a token it lacks), so a revoked token keeps working there. TestHostileProxyRevoke must catch it. Never set in a normal build.
const brokenRevoke = true
