//go:build lockd_broken_routelabel

package httpapi

// brokenRouteLabel labels a request's metrics with its raw path: a
// deliberately broken build (-tags lockd_broken_routelabel) that
// TestHostileCredentials must catch (issue 22, hole 8). Never set in a
// normal build.
const brokenRouteLabel = true
