//go:build !lockd_broken_earlyexpiry

package chaos

const brokenEarlyExpiryBuild = false
