//go:build !lockd_broken_refreshgap

package httpapi

const brokenRefreshGap = false
