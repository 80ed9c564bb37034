//go:build !lockd_broken_tls

package httpapi

const brokenClientCerts = false
