//go:build !lockd_broken_watchquota

package cell

const brokenWatchQuota = false
