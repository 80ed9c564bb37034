//go:build lockd_broken_tls

package httpapi

// brokenClientCerts serves clients that present no certificate: a
// deliberately broken build (-tags lockd_broken_tls) that TestMutualTLS
// must catch. Never set in a normal build.
const brokenClientCerts = true
