//go:build !lockd_broken_earlyexpiry

package session

const brokenEarlyExpiry = false
