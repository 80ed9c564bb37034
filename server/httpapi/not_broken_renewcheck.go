//go:build !lockd_broken_renewcheck

package httpapi

const brokenRenewCheck = false
