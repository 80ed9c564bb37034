//go:build !lockd_broken_routelabel

package httpapi

const brokenRouteLabel = false
